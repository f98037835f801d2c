package source

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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

// expect reports, as an error of t, deltas whose summary is not want.
func (c collected) expect(t testing.TB, want ...string) {
	t.Helper()
	if s := c.summary(); !slices.Equal(s, want) {
		t.Errorf("deltas:\n%v\nwant\n%v", s, want)
	}
}

func newTestTracker(prior map[string]checkpoint.Position, keepOld bool) (*tracker, *collected) {
	return newTestTrackerIn(prior, 1, keepOld)
}

func newTestTrackerIn(prior map[string]checkpoint.Position, namespaces int, keepOld bool) (*tracker, *collected) {
	c := &collected{}
	return newTracker(configmaps, prior, nil, namespaces, c, keepOld, slog.New(slog.NewTextHandler(io.Discard, nil))), c
}

func items(objs ...*unstructured.Unstructured) []*unstructured.Unstructured { return objs }

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
	if tr.replace("", items(cm("same", "u1", "10"), cm("changed", "u2", "20"), cm("recreate", "u9", "21"), cm("new", "u7", "22")), "30") {
		t.Error("the first list reported as a relist")
	}
	select {
	case <-tr.allListed:
	default:
		t.Error("allListed still open after the only namespace listed")
	}
	// Created again after the list, before the diff ended: its old
	// incarnation's delete must come first.
	tr.add(cm("late", "u8", "31"))
	if n, _ := tr.finishInitialList(); n != 2 {
		t.Errorf("finishInitialList reported %d deletes, want 2", n)
	}
	// After the diff, adds are plain watch events.
	tr.add(cm("after", "u10", "32"))

	got.expect(t,
		"updated ns/changed u2@20 snapshot",
		"deleted ns/recreate u3@21 snapshot",
		"added ns/recreate u9@21 snapshot",
		"added ns/new u7@22 snapshot",
		"deleted ns/late u6@31 snapshot",
		"added ns/late u8@31 snapshot",
		"deleted ns/gone-a u5@30 snapshot",
		"deleted ns/gone-b u4@30 snapshot",
		"added ns/after u10@32",
	)
	for _, d := range *got {
		if d.Type == Deleted && d.Name == "gone-a" && d.Object.GetResourceVersion() != "14" {
			t.Errorf("gone-a: object at %s, want its last published state, 14", d.Object.GetResourceVersion())
		}
		if d.Object.GetUID() != d.UID || d.Object.GetName() != d.Name || d.Object.GetKind() != "ConfigMap" {
			t.Errorf("%s %s: object does not carry the identity: %v", d.Type, d.Key(), d.Object.Object)
		}
	}
	if n := tr.size(); n != 6 {
		t.Errorf("tracker knows %d objects, want 6", n)
	}
}

// The diff waits for every namespace's first list: a position in the
// checkpoint is deleted only when no namespace listed it.
func TestInitialListOfSeveralNamespaces(t *testing.T) {
	tr, got := newTestTrackerIn(map[string]checkpoint.Position{
		"a/x": {UID: "u1", ResourceVersion: "1"},
		"b/y": {UID: "u2", ResourceVersion: "2"},
		"b/z": {UID: "u3", ResourceVersion: "3"},
	}, 2, false)
	x := cm("x", "u1", "1")
	x.SetNamespace("a")
	tr.replace("a", items(x), "10")
	select {
	case <-tr.allListed:
		t.Fatal("allListed closed before namespace b listed")
	default:
	}
	y := cm("y", "u2", "2")
	y.SetNamespace("b")
	tr.replace("b", items(y), "11")
	<-tr.allListed
	tr.finishInitialList()
	got.expect(t, "deleted b/z u3@11 snapshot")
}

func TestWatchEvents(t *testing.T) {
	tr, got := newTestTracker(nil, true)
	tr.replace("", nil, "1")
	tr.finishInitialList()

	tr.add(cm("a", "u1", "1"))
	tr.update(cm("a", "u1", "1")) // nothing new
	tr.update(cm("a", "u1", "2"))
	tr.remove(cm("a", "u1", "3"))
	// A modification of an object never seen is news to consumers too.
	tr.update(cm("b", "u2", "4"))

	got.expect(t,
		"added ns/a u1@1",
		"updated ns/a u1@2",
		"deleted ns/a u1@3",
		"added ns/b u2@4",
	)
	if old := (*got)[1].OldObject; old == nil || old.GetResourceVersion() != "1" {
		t.Errorf("updated delta's OldObject = %v, want the state at 1", old)
	}
	if (*got)[2].Object.GetResourceVersion() != "3" {
		t.Errorf("delete does not carry the final state")
	}
	if n := tr.size(); n != 1 {
		t.Errorf("tracker knows %d objects, want 1", n)
	}
}

// A relist (a list after the first) hands on exactly what changed since
// the watch stopped, marked snapshot: changed and new objects, and known
// objects it lacks as deletes at the list's resourceVersion. Objects of
// other namespaces are not touched.
func TestRelistDiff(t *testing.T) {
	tr, got := newTestTrackerIn(nil, 2, false)
	other := cm("o", "u9", "3")
	other.SetNamespace("other")
	tr.replace("other", items(other), "5")
	tr.replace("ns", items(cm("same", "u1", "1"), cm("changed", "u2", "2"), cm("gone", "u3", "4"), cm("recreated", "u4", "4")), "5")
	tr.finishInitialList()
	*got = nil

	if !tr.replace("ns", items(cm("same", "u1", "1"), cm("changed", "u2", "8"), cm("new", "u5", "9"), cm("recreated", "u6", "9")), "10") {
		t.Error("a second list not reported as a relist")
	}
	tr.update(cm("changed", "u2", "11")) // the watch after it
	got.expect(t,
		"updated ns/changed u2@8 snapshot",
		"added ns/new u5@9 snapshot",
		"deleted ns/recreated u4@9 snapshot",
		"added ns/recreated u6@9 snapshot",
		"deleted ns/gone u3@10 snapshot",
		"updated ns/changed u2@11",
	)
}

func TestOldObjectOnlyWhenAsked(t *testing.T) {
	tr, got := newTestTracker(nil, false)
	tr.replace("", items(cm("a", "u1", "1")), "1")
	tr.finishInitialList()
	tr.update(cm("a", "u1", "2"))
	if len(*got) != 2 || (*got)[1].OldObject != nil {
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
	tr.replace("", items(cm("listed", "u1", "5")), "9")
	tr.finishInitialList()
	got.expect(t, "added ns/listed u1@5 snapshot", "deleted ns/missing u2@9 snapshot")
}

// The store hands on transformed objects, ignores what is not an object,
// and reports relists.
func TestStore(t *testing.T) {
	tr, got := newTestTracker(nil, false)
	var relists []string
	st := &store{t: tr, h: testHealth(tr), transform: dropManagedFields, relisted: func(ns, rv string) { relists = append(relists, rv) }}
	withFields := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": "kubectl"}}, "metadata", "managedFields")
		return u
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Replace([]any{withFields(cm("a", "u1", "1")), "not an object"}, "2"))
	must(st.Add(withFields(cm("b", "u2", "3"))))
	must(st.Update(withFields(cm("b", "u2", "4"))))
	must(st.Delete(withFields(cm("a", "u1", "5"))))
	must(st.Add(42))
	must(st.Replace(nil, "6"))
	must(st.Resync())
	got.expect(t,
		"added ns/a u1@1 snapshot",
		"added ns/b u2@3",
		"updated ns/b u2@4",
		"deleted ns/a u1@5",
		"deleted ns/b u2@6 snapshot",
	)
	for _, d := range *got {
		if _, found, _ := unstructured.NestedFieldNoCopy(d.Object.Object, "metadata", "managedFields"); found {
			t.Errorf("%s %s: managedFields not dropped", d.Type, d.Key())
		}
	}
	if !slices.Equal(relists, []string{"6"}) {
		t.Errorf("relists reported: %v, want [6]", relists)
	}
}

// A list served from a lagging cache may hold an older state than the one
// known (from the checkpoint or the watch). Nothing goes back in time: the
// older state and the watch events replayed after it produce nothing until
// a newer one comes.
func TestOlderStatesAreNotHandedOn(t *testing.T) {
	tr, got := newTestTracker(map[string]checkpoint.Position{"ns/a": {UID: "u1", ResourceVersion: "10"}}, false)
	tr.replace("", items(cm("a", "u1", "8")), "8")
	tr.finishInitialList()
	tr.update(cm("a", "u1", "9"))
	tr.update(cm("a", "u1", "10"))
	tr.update(cm("a", "u1", "11"))
	got.expect(t, "updated ns/a u1@11")
}

// With OldObject, an object unchanged since the last run still gets its
// previous state on its first update after a restart.
func TestOldObjectAfterRestart(t *testing.T) {
	tr, got := newTestTracker(map[string]checkpoint.Position{"ns/a": {UID: "u1", ResourceVersion: "5"}}, true)
	tr.replace("", items(cm("a", "u1", "5")), "7")
	tr.finishInitialList()
	tr.update(cm("a", "u1", "8"))
	if len(*got) != 1 || (*got)[0].OldObject == nil || (*got)[0].OldObject.GetResourceVersion() != "5" {
		t.Errorf("deltas %v; want one update whose OldObject is the state at 5", got.summary())
	}
}

func TestRepeatedNamespacesGetOneReflector(t *testing.T) {
	s := New(nil, Options{Namespaces: []string{"a", "b", "a"}}, nil, HandlerFunc(func(Delta) {}), slog.New(slog.DiscardHandler))
	if got := s.namespacesFor(configmaps); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("namespaces %v, want [a b]", got)
	}
}

func TestWatchListRefused(t *testing.T) {
	on := true
	gr := schema.GroupResource{Resource: "configmaps"}
	refused := apierrors.NewInvalid(schema.GroupKind{Kind: "ListOptions"}, "", nil)
	for _, tc := range []struct {
		opts metav1.ListOptions
		err  error
		want bool
	}{
		{metav1.ListOptions{SendInitialEvents: &on}, refused, true},
		{metav1.ListOptions{SendInitialEvents: &on}, apierrors.NewForbidden(gr, "", nil), true},
		{metav1.ListOptions{SendInitialEvents: &on}, apierrors.NewServiceUnavailable("down"), false},
		{metav1.ListOptions{}, refused, false},
	} {
		if got := watchListRefused(tc.opts, tc.err); got != tc.want {
			t.Errorf("watchListRefused(%+v, %v) = %v, want %v", tc.opts, tc.err, got, tc.want)
		}
	}
}

// testHealth is a health for a store of tr's resource made by a test.
func testHealth(tr *tracker) *health {
	return newHealth(tr.res, "", DefaultStallTimeout, time.Now(), func(error) {})
}
