package source

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/resourceversion"
	"github.com/kubebus/bridge/test/poll"
)

// noView is view.Definition without a filter or a projection: every
// object is in, as it came, and a state made by a view that projected
// nothing is current.
type noView struct{}

func (noView) Apply(_ Resource, obj *RawObject) ViewResult {
	return ViewResult{In: true, Object: obj}
}

func (noView) Current(state string) bool {
	def, _, _ := strings.Cut(state, ".")
	return !strings.HasSuffix(def, "p")
}

func (noView) Unchanged(prev, next string) bool { return true }

// runs is a bridge's published record across runs of a Source: the
// checkpoint its pipeline would commit (every delta taken as
// acknowledged), and what a consumer that drops every state not newer
// than the one it holds makes of the stream.
type runs struct {
	mu   sync.Mutex
	snap checkpoint.Snapshot
	// rv is, per key, the newest resourceVersion the consumer took; held
	// the object it holds, as uid@resourceVersion of the object itself.
	rv     map[string]uint64
	held   map[string]string
	deltas []Delta // of the current run
}

func newRuns() *runs {
	return &runs{snap: checkpoint.Snapshot{Objects: map[string]checkpoint.Position{}}, rv: map[string]uint64{}, held: map[string]string{}}
}

func (r *runs) Load(context.Context, string) (checkpoint.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return checkpoint.Snapshot{Objects: maps.Clone(r.snap.Objects), LastResourceVersion: r.snap.LastResourceVersion}, nil
}

func (r *runs) OnDelta(d Delta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deltas = append(r.deltas, d)
	key := d.Key()
	if d.Type == Deleted {
		delete(r.snap.Objects, key)
	} else {
		r.snap.Objects[key] = checkpoint.Position{UID: string(d.UID), ResourceVersion: d.ResourceVersion, View: d.View}
	}
	if resourceversion.Before(r.snap.LastResourceVersion, d.ResourceVersion) || r.snap.LastResourceVersion == "" {
		r.snap.LastResourceVersion = d.ResourceVersion
	}
	// The consumer: a state not newer than the one taken is a repeat,
	// except the delete of that state.
	rv, err := strconv.ParseUint(d.ResourceVersion, 10, 64)
	if err != nil {
		panic(err)
	}
	if last, ok := r.rv[key]; ok && (rv < last || (rv == last && d.Type != Deleted)) {
		return
	}
	r.rv[key] = rv
	if d.Type == Deleted {
		delete(r.held, key)
		return
	}
	r.held[key] = d.Raw.Meta().UID + "@" + d.Raw.Meta().ResourceVersion
}

// run runs a Source of view on ns until it synced and during, then stops
// it, and returns its deltas.
func (r *runs) run(t *testing.T, c cluster, ns string, view View, during func()) []string {
	t.Helper()
	r.mu.Lock()
	r.deltas = nil
	r.mu.Unlock()
	opts := Options{Resources: []Resource{configmaps}, Namespaces: []string{ns}, View: view}
	src := sourceOn(t, c.rc, PathRaw, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
	src.loader, src.handler = r, r
	ctx, cancel := context.WithCancel(t.Context())
	done := startSynced(t, ctx, cancel, src, 30*time.Second, "the source never listed its namespace")
	if during != nil {
		during()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("source: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.deltas {
		s := string(d.Type) + " " + d.Name
		if d.Reason != "" {
			s += " " + string(d.Reason)
		}
		if d.Raw != nil && d.ResourceVersion != d.Raw.Meta().ResourceVersion {
			s += " dated"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// wait polls until the current run handed on a delta of type typ of the
// object name.
func (r *runs) wait(t *testing.T, typ DeltaType, name string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, d := range r.deltas {
			if d.Type == typ && d.Name == name {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no %s delta of %s yet", typ, name)
	})
}

// A filter turned off publishes every object that re-enters the stream
// so that a consumer that keeps each object's newest resourceVersion
// takes it: one that left when the filter was turned on (dated by the
// revision then), one that left by a change while the bridge was down,
// and one that left by a change while it ran (at its own
// resourceVersion), though none changed since. The first run has no view,
// so that the positions the filtered run left hold no view state.
func TestViewTurnedOffPublishesReentriesAnew(t *testing.T) {
	c := sharedCluster(t)
	ns := c.namespace(t)
	cms := c.kc.CoreV1().ConfigMaps(ns)
	set := func(name, keep string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"keep": keep, "value": "v", "noise": "n"}}
		var err error
		if _, err = cms.Get(t.Context(), name, metav1.GetOptions{}); err == nil {
			_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
		} else {
			_, err = cms.Create(t.Context(), cm, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	set("stays", "yes")
	set("definition", "no") // out of the filter when it is turned on
	set("down", "yes")      // leaves while the bridge is down
	set("live", "yes")      // leaves while the bridge runs
	r := newRuns()

	want := []string{"added definition", "added down", "added live", "added stays"}
	if got := r.run(t, c, ns, noView{}, nil); !slices.Equal(got, want) {
		t.Errorf("first run, no view: %q, want %q", got, want)
	}

	set("down", "no")
	filter := testView{def: "d1"}
	want = []string{"deleted definition left-filter dated", "deleted down left-filter", "deleted live left-filter"}
	if got := r.run(t, c, ns, filter, func() {
		set("live", "no")
		r.wait(t, Deleted, "live")
	}); !slices.Equal(got, want) {
		t.Errorf("filter turned on: %q, want %q", got, want)
	}

	want = []string{"added definition dated", "added down dated", "added live dated"}
	if got := r.run(t, c, ns, noView{}, nil); !slices.Equal(got, want) {
		t.Errorf("filter turned off: %q, want %q", got, want)
	}
	l, err := cms.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, cm := range l.Items {
		listed[ns+"/"+cm.Name] = string(cm.UID) + "@" + cm.ResourceVersion
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(listed)) {
		if r.held[key] != listed[key] {
			t.Errorf("the consumer holds %s as %q, LIST as %q", key, r.held[key], listed[key])
		}
	}
	for _, key := range slices.Sorted(maps.Keys(r.held)) {
		if _, ok := listed[key]; !ok {
			t.Errorf("the consumer holds %s, LIST does not", key)
		}
	}
}

// The first start reads no revision and dates nothing. Any later one
// reads it, and dates by it what enters the stream unchanged since the
// last committed delta; an intent only when the view may have changed,
// since otherwise it is the repeat of a creation, to be deduplicated by
// its id.
func TestDateFrom(t *testing.T) {
	prior := map[string]checkpoint.Position{"ns/intent": {UID: "u1"}, "ns/same": {UID: "u2", ResourceVersion: "10"}}
	for _, tc := range []struct {
		name string
		snap checkpoint.Snapshot
		view View
		// revisions are the revisions read, one after the other
		// (the last one again when there are more reads).
		revisions []string
		want      []string
	}{
		{"first start", checkpoint.Snapshot{}, noView{}, []string{"25"}, []string{"added ns/entered u3@12 snapshot", "added ns/new u4@21 snapshot"}},
		{"published before", checkpoint.Snapshot{Objects: prior, LastResourceVersion: "20"}, noView{}, []string{"25"},
			[]string{"added ns/intent u1@11 snapshot", "added ns/entered u3@25 snapshot", "added ns/new u4@21 snapshot"}},
		{"every object left the view", checkpoint.Snapshot{LastResourceVersion: "20"}, noView{}, []string{"25"},
			[]string{"added ns/entered u3@25 snapshot", "added ns/new u4@21 snapshot"}},
		{"a view now", checkpoint.Snapshot{Objects: prior, LastResourceVersion: "20"}, testView{def: "d1"}, []string{"25"},
			[]string{"added ns/intent u1@25 snapshot view=d1.v", "added ns/entered u3@25 snapshot view=d1.v", "added ns/new u4@21 snapshot view=d1.v"}},
		// Nothing was written since the last delta committed, which may
		// be the object's delete: the revision is read again until it
		// moves.
		{"a revision that has not moved", checkpoint.Snapshot{LastResourceVersion: "20"}, noView{}, []string{"20", "20", "26"},
			[]string{"added ns/entered u3@26 snapshot", "added ns/new u4@21 snapshot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, got := newViewTracker(maps.Clone(tc.snap.Objects), tc.view)
			reads := 0
			rv, err := tr.dateFrom(tc.snap, func() (string, error) { reads++; return tc.revisions[min(reads, len(tc.revisions))-1], nil })
			if err != nil {
				t.Fatal(err)
			}
			if first := tc.snap.LastResourceVersion == ""; first != (reads == 0) || first != (rv == "") {
				t.Errorf("%d reads of the revision, %q returned", reads, rv)
			}
			var objs []object
			if len(tc.snap.Objects) > 0 {
				objs = append(objs, viewCM(t, "intent", "u1", "11", "yes", "v", "n"), viewCM(t, "same", "u2", "10", "yes", "v", "n"))
			}
			objs = append(objs, viewCM(t, "entered", "u3", "12", "yes", "v", "n"), viewCM(t, "new", "u4", "21", "yes", "v", "n"))
			list(tr, "30", objs...)
			tr.finishInitialList()
			if g := viewSummary(*got); !slices.Equal(g, tc.want) {
				t.Errorf("got %q\nwant %q", g, tc.want)
			}
		})
	}
}
