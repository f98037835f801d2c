package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/test/poll"
)

// With BRIDGE_RESOURCES=*, a CRD installed while the bridge runs is
// watched, its objects published as added; deleted, its objects are
// published as deleted and the resource leaves the watched set without
// an error loop; installed again, its objects are published again; and a
// bridge started while it is gone publishes nothing of it, without error.
func TestWatchEverythingFollowsCRDs(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "every")
		group := "life-" + b.name() + ".example.com"
		plural, kind := "cycles", "Cycle"
		name := plural + "." + group
		k := crdKind(group, plural, kind)

		env := b.env(ns)
		env["BRIDGE_RESOURCES"] = "*"
		m := metrics.New()
		r := startBridgeWith(t, env, bridge.WithMetrics(m))
		watched := func() float64 { return seriesOf(t, m, "bridge_resources_watched", "group")[group] }
		if n := watched(); n != 0 {
			t.Fatalf("%s watched before its CRD exists: %v", group, n)
		}

		// Installed while the bridge runs: 20 objects, 20 added.
		began := time.Now()
		gvr := createCRDAt(t, group, plural, kind, "Namespaced", "v1")
		served := time.Since(began)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			return watched() == 1, fmt.Sprintf("%s not watched yet", name)
		})
		watchedAfter := time.Since(began)
		createObjects(t, gvr, kind, ns, "obj", 20)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			a := actions(b.readKinds(t, ns, []watchedKind{k}))
			return a["added"] == 20, fmt.Sprintf("on the bus: %v, want 20 added", a)
		})
		t.Logf("%s: served by discovery %s after its creation, watched %s after it", name, served.Round(time.Millisecond), watchedAfter.Round(time.Millisecond))
		if n := seriesOf(t, m, "bridge_resources_added_total", "")[""]; n < 1 {
			t.Errorf("bridge_resources_added_total = %v, want at least 1", n)
		}
		errorsBefore := seriesOf(t, m, "bridge_watch_errors_total", "resource")[name]

		// Deleted: 20 deleted, the resource leaves the watched set, and
		// nothing of it is kept.
		deleteCRD(t.Context(), t, name)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			a := actions(b.readKinds(t, ns, []watchedKind{k}))
			return a["deleted"] == 20, fmt.Sprintf("on the bus: %v, want 20 deleted", a)
		})
		poll.Until(t, 30*time.Second, func() (bool, string) {
			return watched() == 0 && loggedFor(r.logs.String(), "resource removed: no longer served", name),
				fmt.Sprintf("%s still watched (%v)", name, watched())
		})
		if n := seriesOf(t, m, "bridge_resources_removed_total", "")[""]; n < 1 {
			t.Errorf("bridge_resources_removed_total = %v, want at least 1", n)
		}
		if _, ok := seriesOf(t, m, "bridge_watch_healthy", "resource")[name]; ok {
			t.Errorf("%s still has a watch after its removal", name)
		}
		if _, ok := seriesOf(t, m, "bridge_informer_synced", "resource")[name]; ok {
			t.Errorf("%s still has an informer after its removal", name)
		}
		// Its watch stopped with the removal: a handful of failed calls
		// at most while the CRD went, no loop.
		errs := seriesOf(t, m, "bridge_watch_errors_total", "resource")[name] - errorsBefore
		t.Logf("%s: %v watch errors while its CRD was deleted", name, errs)
		if errs > 5 {
			t.Errorf("%s: %v watch errors while its CRD was deleted, want at most 5", name, errs)
		}

		// Installed again: 5 objects, 5 added.
		gvr = createCRDAt(t, group, plural, kind, "Namespaced", "v1")
		createObjects(t, gvr, kind, ns, "obj", 5)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			a := actions(b.readKinds(t, ns, []watchedKind{k}))
			return a["added"] == 25, fmt.Sprintf("on the bus: %v, want 25 added (20, then 5)", a)
		})
		r.stop(t)

		// Deleted while the bridge is down, then a start: no error. In
		// the history layout (NATS here) nothing is published of it; in
		// the state layout (Kafka here), where the bus is the record,
		// the deletes of its 5 objects, marked reconciled.
		deleteCRD(t.Context(), t, name)
		before := b.readKinds(t, ns, []watchedKind{k})
		r = startBridgeWith(t, env, bridge.WithMetrics(metrics.New()))
		r.stop(t)
		after := b.readKinds(t, ns, []watchedKind{k})
		wantNew, wantDeleted := 0, 20
		if b.name() == "kafka" {
			wantNew, wantDeleted = 5, 25
		}
		published := newEvents(before, after)
		if len(published) != wantNew {
			t.Errorf("%d messages of %s published by a start while its CRD is gone: %v, want %d", len(published), name, actions(published), wantNew)
		}
		for _, m := range published {
			if m.Action != "deleted" || m.Reason != "reconciled" {
				t.Errorf("a start while %s is gone published %s %s (reason %q), want deletes marked reconciled", name, m.Action, m.Key(), m.Reason)
			}
		}
		a := actions(after)
		if a["added"] != 25 || a["deleted"] != wantDeleted || len(after) != 25+wantDeleted {
			t.Errorf("on the bus: %v, want 25 added and %d deleted, nothing else", a, wantDeleted)
		}
		for _, line := range strings.Split(r.logs.String(), "\n") {
			if strings.Contains(line, "resource no longer served") {
				continue // the deletes of its objects, in the state layout
			}
			if strings.Contains(line, name) && (strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN")) {
				t.Errorf("a start while %s is gone logged: %s", name, line)
			}
		}
	})
}

// loggedFor reports whether a line of logs has msg and names resource.
func loggedFor(logs, msg, resource string) bool {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, msg) && strings.Contains(strings.TrimRight(line, "\n")+" ", " resource="+resource+" ") {
			return true
		}
	}
	return false
}

// A CRD that a pattern selects, changed to prefer another version, is
// watched at that version under the same checkpoint: what was published
// is not published again, and what changes after comes at the new
// version; the bridge does not stop.
func TestWatchEverythingFollowsAPreferredVersion(t *testing.T) {
	ns := namespace(t, "moved")
	group, plural, kind := "move.example.com", "crates", "Crate"
	name := plural + "." + group
	gvr := createCRDAt(t, group, plural, kind, "Namespaced", "v1")
	createObjects(t, gvr, kind, ns, "crate", 3)
	s := &sinktest.Recorder{}
	r := startBridge(t, map[string]string{
		"BRIDGE_RESOURCES":    "*." + group,
		"BRIDGE_NAMESPACES":   ns,
		"BRIDGE_CHECKPOINT":   "file:" + t.TempDir() + "/ckpt.db",
		"BRIDGE_CLUSTER_NAME": "e2e",
	}, s)
	poll.Until(t, 30*time.Second, func() (bool, string) { return s.Len() == 3, fmt.Sprintf("%d of 3 messages", s.Len()) })

	// Serve v2 too, and store it: v2 is preferred now.
	dyn := dynamicClient(t)
	crd, err := dyn.Resource(corpus.CRDResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	schema := map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
	if err := unstructured.SetNestedSlice(crd.Object, []any{
		map[string]any{"name": "v1", "served": true, "storage": false, "schema": schema},
		map[string]any{"name": "v2", "served": true, "storage": true, "schema": schema},
	}, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(corpus.CRDResource).Update(t.Context(), crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return loggedFor(r.logs.String(), "resource served at another preferred version: watched there", name),
			name + " not watched at v2 yet"
	})
	if !strings.Contains(r.logs.String(), "msg=\"resource served at another preferred version: watched there\" component=source resource="+name+" version=v2") {
		t.Errorf("%s not watched at v2", name)
	}
	gvr.Version = "v2"
	createObjects(t, gvr, kind, ns, "later", 1)
	poll.Until(t, 30*time.Second, func() (bool, string) { return s.Len() >= 4, fmt.Sprintf("%d of 4 messages", s.Len()) })
	r.stop(t)
	msgs := s.Accepted()
	if len(msgs) != 4 {
		t.Errorf("%d messages, want 4: the 3 objects published once, at v1, and the one made later", len(msgs))
	}
	for _, m := range msgs {
		want := group + "/v1"
		if m.Name == "later-0" {
			want = group + "/v2"
		}
		if m.Action != "added" || m.APIVersion != want {
			t.Errorf("%s: %s at %s, want added at %s", m.Name, m.Action, m.APIVersion, want)
		}
	}
}
