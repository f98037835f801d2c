package source

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/checkpoint"
)

var configmaps = Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}

func cm(name, uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(typesUID(uid))
	u.SetResourceVersion(rv)
	return u
}

type collected []Delta

func (c *collected) OnDelta(d Delta) { *c = append(*c, d) }

func (c collected) summary() []string {
	var out []string
	for _, d := range c {
		s := string(d.Type) + " " + d.Key() + " " + string(d.UID) + "@" + d.ResourceVersion
		if d.Snapshot {
			s += " snapshot"
		}
		out = append(out, s)
	}
	return out
}

func newTestTracker(prior map[string]checkpoint.Position, keepOld bool) (*tracker, *collected) {
	c := &collected{}
	return newTracker(configmaps, prior, c, keepOld, slog.New(slog.NewTextHandler(io.Discard, nil))), c
}

func TestInitialListDiff(t *testing.T) {
	prior := map[string]checkpoint.Position{
		"ns/same":     {UID: "u1", ResourceVersion: "10"},
		"ns/changed":  {UID: "u2", ResourceVersion: "11"},
		"ns/recreate": {UID: "u3", ResourceVersion: "12"},
		"ns/gone-b":   {UID: "u4", ResourceVersion: "13"},
		"ns/gone-a":   {UID: "u5", ResourceVersion: "14"},
		"ns/late":     {UID: "u6", ResourceVersion: "15"},
	}
	tr, got := newTestTracker(prior, false)
	h := tr.eventHandler()
	h.OnAdd(cm("same", "u1", "10"), true)
	h.OnAdd(cm("changed", "u2", "20"), true)
	h.OnAdd(cm("recreate", "u9", "21"), true)
	h.OnAdd(cm("new", "u7", "22"), true)
	// Created again after the list, before the diff ended: its old
	// incarnation's delete must come first.
	h.OnAdd(cm("late", "u8", "23"), false)
	tr.listed("", "30", false)
	if n := tr.finishInitialList(); n != 2 {
		t.Errorf("finishInitialList reported %d deletes, want 2", n)
	}
	// After the diff, adds are plain watch events.
	h.OnAdd(cm("after", "u10", "24"), false)

	want := []string{
		"updated ns/changed u2@20 snapshot",
		"deleted ns/recreate u3@21 snapshot",
		"added ns/recreate u9@21 snapshot",
		"added ns/new u7@22 snapshot",
		"deleted ns/late u6@23 snapshot",
		"added ns/late u8@23 snapshot",
		"deleted ns/gone-a u5@30 snapshot",
		"deleted ns/gone-b u4@30 snapshot",
		"added ns/after u10@24",
	}
	if s := got.summary(); !slices.Equal(s, want) {
		t.Errorf("deltas:\n%v\nwant\n%v", s, want)
	}
	for _, d := range *got {
		if d.Type == Deleted && d.Name == "gone-a" && d.Object.GetResourceVersion() != "14" {
			t.Errorf("gone-a: object at %s, want its last published state, 14", d.Object.GetResourceVersion())
		}
		if d.Object.GetUID() != d.UID || d.Object.GetName() != d.Name || d.Object.GetKind() != "ConfigMap" {
			t.Errorf("%s %s: object does not carry the identity: %v", d.Type, d.Key(), d.Object.Object)
		}
	}
}

func TestWatchEvents(t *testing.T) {
	tr, got := newTestTracker(nil, true)
	tr.finishInitialList()
	h := tr.eventHandler()

	h.OnAdd(cm("a", "u1", "1"), false)
	h.OnUpdate(cm("a", "u1", "1"), cm("a", "u1", "1")) // resync: nothing
	h.OnUpdate(cm("a", "u1", "1"), cm("a", "u1", "2"))
	h.OnDelete(cm("a", "u1", "3"))
	// A delete the informer learnt of on a relist: unwrapped, last state.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: cm("b", "u2", "4")})
	// A tombstone without a usable object still yields a delete by key.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: nil})
	// Objects of the wrong type are ignored, not a panic.
	h.OnAdd("not an object", false)
	h.OnDelete(42)

	want := []string{
		"added ns/a u1@1",
		"updated ns/a u1@2",
		"deleted ns/a u1@3",
		"deleted ns/b u2@4 snapshot",
		"deleted ns/c @ snapshot",
	}
	if s := got.summary(); !slices.Equal(s, want) {
		t.Errorf("deltas:\n%v\nwant\n%v", s, want)
	}
	if old := (*got)[1].OldObject; old == nil || old.GetResourceVersion() != "1" {
		t.Errorf("updated delta's OldObject = %v, want the state at 1", old)
	}
	if (*got)[3].Object.GetResourceVersion() != "4" {
		t.Errorf("tombstone delete does not carry the last known state")
	}
}

// After a relist, the changes it found are marked snapshot; changes the
// watch reports afterwards are not.
func TestRelistMarksSnapshot(t *testing.T) {
	tr, got := newTestTracker(nil, false)
	tr.listed("", "5", false)
	tr.finishInitialList()
	h := tr.eventHandler()
	h.OnUpdate(cm("a", "u1", "3"), cm("a", "u1", "4")) // before any relist
	tr.listed("", "10", true)
	h.OnUpdate(cm("a", "u1", "4"), cm("a", "u1", "8")) // found by the relist
	h.OnAdd(cm("b", "u2", "9"), false)                 // found by the relist
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: cm("c", "u3", "2")})
	h.OnUpdate(cm("a", "u1", "8"), cm("a", "u1", "11")) // the watch after it
	want := []string{
		"updated ns/a u1@4",
		"updated ns/a u1@8 snapshot",
		"added ns/b u2@9 snapshot",
		"deleted ns/c u3@2 snapshot",
		"updated ns/a u1@11",
	}
	if s := got.summary(); !slices.Equal(s, want) {
		t.Errorf("deltas:\n%v\nwant\n%v", s, want)
	}
}

func TestOldObjectOnlyWhenAsked(t *testing.T) {
	tr, got := newTestTracker(nil, false)
	tr.finishInitialList()
	tr.eventHandler().OnUpdate(cm("a", "u1", "1"), cm("a", "u1", "2"))
	if len(*got) != 1 || (*got)[0].OldObject != nil {
		t.Errorf("OldObject kept without being asked for: %+v", *got)
	}
}

func TestDropManagedFields(t *testing.T) {
	u := cm("a", "u1", "1")
	u.SetManagedFields(nil)
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": "kubectl"}}, "metadata", "managedFields")
	out, err := dropManagedFields(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(out.(*unstructured.Unstructured).Object, "metadata", "managedFields"); found {
		t.Error("managedFields still there")
	}
	if out.(*unstructured.Unstructured).GetName() != "a" {
		t.Error("transform changed other fields")
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

// An intent (a uid without a resourceVersion) means the object may have
// been published: listed, it is published as created; missing, as deleted.
func TestIntentsInTheCheckpoint(t *testing.T) {
	tr, got := newTestTracker(map[string]checkpoint.Position{
		"ns/listed":  {UID: "u1"},
		"ns/missing": {UID: "u2"},
	}, false)
	tr.eventHandler().OnAdd(cm("listed", "u1", "5"), true)
	tr.listed("", "9", false)
	tr.finishInitialList()
	want := []string{"added ns/listed u1@5 snapshot", "deleted ns/missing u2@9 snapshot"}
	if s := got.summary(); !slices.Equal(s, want) {
		t.Errorf("deltas:\n%v\nwant\n%v", s, want)
	}
}
