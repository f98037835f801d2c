package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/resourceversion"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// stoppable is a member whose Source is not run: stopping it records the
// cause and marks it done.
func stoppable(s *Set, res Resource) (m *member, cause func() error) {
	m = s.newMember(res, false)
	var mu sync.Mutex
	var got error
	m.stop = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if got == nil {
			got = err
			close(m.done)
		}
	}
	return m, func() error { mu.Lock(); defer mu.Unlock(); return got }
}

// crdObject is a CRD as the follower's informer holds it.
func crdObject(gr schema.GroupResource, served, established bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"group": gr.Group, "names": map[string]any{"plural": gr.Resource},
			"versions": []any{map[string]any{"name": "v1", "served": served}}},
	}}
	u.SetName(gr.String())
	if established {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Established", "status": "True"}}, "status", "conditions")
	}
	return u
}

// followerOf is a follower whose CRD informer holds crds.
func followerOf(t *testing.T, crds ...*unstructured.Unstructured) *follower {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	f := &follower{crds: store, defined: map[schema.GroupResource]bool{}}
	for _, c := range crds {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
		f.define(c)
	}
	return f
}

func discoveryOf(lists ...*metav1.APIResourceList) *fake.FakeDiscovery {
	return &fake.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}
}

var lw = []string{"list", "watch"}

// reselect stops a resource only when discovery and the CRDs agree it is
// gone, and watches one served at another preferred version there.
func TestSetReselectGoneAndMoved(t *testing.T) {
	doodads := Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "doodads"}, Kind: "Doodad"}
	disc := discoveryOf(&metav1.APIResourceList{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: lw},
	}})
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What is added is checked, and not started (the client's transport
	// is not wrapped): this test is about what is stopped.
	client, listed := listsSeen()
	s := NewSet(client, disc, SetOptions{Selection: sel}, nil, nil, slog.New(slog.DiscardHandler))
	// Discovery lags: gizmos' CRD is served, and discovery does not show it
	// yet (or any more); doodads' CRD is gone, and so is it from discovery.
	s.follow = followerOf(t, crdObject(gizmos.GroupResource(), true, true), crdObject(doodads.GroupResource(), true, true))
	if err := s.follow.crds.Delete(crdObject(doodads.GroupResource(), true, true)); err != nil {
		t.Fatal(err)
	}
	w, wStop := stoppable(s, widgets)
	g, gStop := stoppable(s, gizmos)
	d, dStop := stoppable(s, doodads)
	for _, m := range []*member{w, g, d} {
		s.members[m.res.GroupResource()] = m
	}
	var wg sync.WaitGroup
	s.reselect(t.Context(), &wg)
	wg.Wait()
	s.queue.ShutDown()

	if err := gStop(); err != nil {
		t.Errorf("gizmos, served by its CRD while discovery lags, stopped with %v; want kept", err)
	}
	if _, ok := s.members[gizmos.GroupResource()]; !ok {
		t.Error("gizmos no longer a member; want kept while its CRD is served")
	}
	if err := dStop(); err != errRetired {
		t.Errorf("doodads, gone from discovery and CRDs, stopped with %v; want errRetired", err)
	}
	if err := wStop(); err != errReplaced {
		t.Errorf("widgets, served at v2 only, stopped with %v; want errReplaced", err)
	}
	if got := listed(); !slices.Equal(got, []string{"example.com/v2, Resource=widgets"}) {
		t.Errorf("listed %q; want widgets checked at v2 only", got)
	}
}

// listsSeen is a dynamic client that serves empty lists of gizmos and
// widgets (v1 and v2), and tells which were listed.
func listsSeen() (*dynamicfake.FakeDynamicClient, func() []string) {
	w2 := widgets.GroupVersionResource
	w2.Version = "v2"
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gizmos.GroupVersionResource: "GizmoList", widgets.GroupVersionResource: "WidgetList", w2: "WidgetList"})
	var mu sync.Mutex
	var seen []string
	c.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a.GetResource().String())
		return false, nil, nil
	})
	return c, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(seen) }
}

var gizmos = Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}, Kind: "Gizmo"}

// failingLists is a dynamic client whose lists of gizmos fail with err.
func failingLists(err error) *dynamicfake.FakeDynamicClient {
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gizmos.GroupVersionResource: "GizmoList"})
	c.PrependReactor("list", "gizmos", func(k8stesting.Action) (bool, runtime.Object, error) {
		if err == nil {
			return false, nil, nil
		}
		return true, nil, err
	})
	return c
}

// Check leaves out a resource only a pattern selects for any fault of its
// own, and fails for a bad selector, a transport not wrapped, or a
// resource named.
func TestSetCheckSkipRules(t *testing.T) {
	gr := gizmos.GroupResource()
	for _, tc := range []struct {
		name    string
		err     error // the lists' error; nil: they succeed
		named   bool
		wantErr error // nil: none
		left    bool  // left out (and to be retried), not failing Check
	}{
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New("no")), false, nil, true},
		{"not found", apierrors.NewNotFound(gr, ""), false, nil, true},
		{"unavailable", apierrors.NewServiceUnavailable("no"), false, nil, true},
		{"conversion webhook down (500)", apierrors.NewInternalError(errors.New("conversion webhook")), false, nil, true},
		{"gateway timeout (504)", apierrors.NewTimeoutError("slow", 0), false, nil, true},
		{"bad selector", apierrors.NewBadRequest("bad selector"), false, ErrBadSelector, false},
		{"transport not wrapped", nil, false, errNotWrapped, false},
		{"named: its fault is the bridge's", apierrors.NewInternalError(errors.New("conversion webhook")), true, errors.New("any"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := NewSelection([]string{"*.example.com"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := NewSet(failingLists(tc.err), discoveryOf(), SetOptions{Selection: sel}, nil, nil, slog.New(slog.DiscardHandler))
			s.members[gr] = s.newMember(gizmos, tc.named)
			err = s.Check(t.Context())
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Check: %v; want the resource left out", err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("Check: nil; want %v", tc.wantErr)
			case tc.wantErr != nil && tc.wantErr.Error() != "any" && !errors.Is(err, tc.wantErr):
				t.Fatalf("Check: %v; want %v", err, tc.wantErr)
			}
			if _, kept := s.members[gr]; kept == tc.left {
				t.Errorf("member kept: %v; want left out: %v", kept, tc.left)
			}
			if _, pending := s.pending[gr]; pending != tc.left {
				t.Errorf("to be retried: %v; want %v", pending, tc.left)
			}
		})
	}
}

// setEvents records what a Set tells its observer.
type setEvents struct {
	mu          sync.Mutex
	watching    []string
	notWatching []string
	inFlight    []int // after each change
	lists       int
}

func (e *setEvents) Watching(res Resource, added bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watching = append(e.watching, fmt.Sprintf("%s added=%v", res.Name(), added))
}

func (e *setEvents) NotWatching(res Resource, removed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notWatching = append(e.notWatching, fmt.Sprintf("%s removed=%v", res.Name(), removed))
}

func (e *setEvents) InitialList(started bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if started {
		e.lists++
	} else {
		e.lists--
	}
	e.inFlight = append(e.inFlight, e.lists)
}

type failingLoader struct{ err error }

func (l failingLoader) Load(context.Context, string) (checkpoint.Snapshot, error) {
	return checkpoint.Snapshot{}, l.err
}

// A resource a pattern selects whose Source fails (here, loading its
// checkpoint) is dropped and retried; the Set goes on.
func TestSetRunRetriesAFailedPatternedResource(t *testing.T) {
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	disc := discoveryOf(&metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "gizmos", Kind: "Gizmo", Verbs: lw},
	}})
	events := &setEvents{}
	// The Source fails before it lists: a list is the retry's check.
	client, listed := listsSeen()
	s := NewSet(client, disc, SetOptions{Selection: sel, Observer: events}, failingLoader{errors.New("checkpoint store unreachable")},
		HandlerFunc(func(Delta) {}), slog.New(slog.DiscardHandler))
	if err := s.Select(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(listed()) == 0 {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v; want it to go on without gizmos", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("gizmos not retried within 10s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v; want nil once ctx ended", err)
	}
	events.mu.Lock()
	defer events.mu.Unlock()
	if want := []string{"gizmos.example.com removed=false"}; !slices.Equal(events.notWatching, want) {
		t.Errorf("NotWatching told %q; want %q", events.notWatching, want)
	}
	select {
	case <-s.Synced():
	default:
		t.Error("Synced not closed: a resource that failed still holds it")
	}
}

// A resource a pattern selects whose initial list keeps failing gives up
// its place among the initial lists, and Synced, after the stall timeout:
// the resources queued behind it are watched, and it is retried later.
func TestSetReleasesAFailingList(t *testing.T) {
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gizmos.GroupVersionResource: "GizmoList", widgets.GroupVersionResource: "WidgetList"})
	client.PrependReactor("list", "gizmos", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("conversion webhook down"))
	})
	events := &setEvents{}
	s := NewSet(client, discoveryOf(), SetOptions{Selection: sel, ListConcurrency: 1, Observer: events,
		Source: Options{StallTimeout: 300 * time.Millisecond}}, emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.DiscardHandler))
	// gizmos sorts first: it takes the only place, widgets waits for it.
	s.members[gizmos.GroupResource()] = s.newMember(gizmos, false)
	s.members[widgets.GroupResource()] = s.newMember(widgets, false)
	runUntilSynced(t, s, 15*time.Second, "the failing list still holds its place")
	events.mu.Lock()
	defer events.mu.Unlock()
	if want := []string{"gizmos.example.com removed=false"}; !slices.Equal(events.notWatching, want) {
		t.Errorf("NotWatching told %q; want %q", events.notWatching, want)
	}
	if i := slices.Index(events.inFlight, 2); i >= 0 {
		t.Errorf("initial lists in flight went to 2 with ListConcurrency 1: %v", events.inFlight)
	}
}

// A resource a selection adds that cannot be checked is retried with
// backoff, with no change in the cluster to prompt it.
func TestSetRetriesAFailedAdd(t *testing.T) {
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	disc := discoveryOf(&metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "gizmos", Kind: "Gizmo", Verbs: lw},
	}})
	client, _ := listsSeen()
	var checks atomic.Int32
	client.PrependReactor("list", "gizmos", func(k8stesting.Action) (bool, runtime.Object, error) {
		checks.Add(1)
		return true, nil, apierrors.NewInternalError(errors.New("conversion webhook down"))
	})
	s := NewSet(client, disc, SetOptions{Selection: sel}, emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	s.queue.Add(selectAll) // as a CRD's change does
	deadline := time.Now().Add(10 * time.Second)
	for checks.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("gizmos checked %d times in 10s; want it retried (3 checks within 1+2 s)", checks.Load())
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// gizmo is an object of gizmos in ns.
func gizmo(ns, name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo"}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetResourceVersion(rv)
	return u
}

// A Source stopped because its resource is no longer served (as a Set
// retires it, while no watch can deliver the deletes) hands on every
// object it still knows as Deleted, at a resourceVersion no older than
// any it handed on, and nothing after Run returns.
func TestSourceRetiredReportsItsObjectsDeleted(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gizmos.GroupVersionResource: "GizmoList"},
		gizmo("a", "one", "11"), gizmo("b", "two", "12"))
	var mu sync.Mutex
	var deltas []Delta
	returned := false
	src := New(client, Options{Resources: []Resource{gizmos}}, emptyLoader{}, HandlerFunc(func(d Delta) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Errorf("delta %s %s/%s handed on after Run returned", d.Type, d.Namespace, d.Name)
		}
		deltas = append(deltas, d)
	}), slog.New(slog.DiscardHandler))
	ctx, stop := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	select {
	case <-src.Synced():
	case err := <-done:
		t.Fatalf("Run returned %v before it synced", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not synced within 10s")
	}
	stop(errRetired)
	if err := <-done; err != nil {
		t.Errorf("Run: %v; want nil when retired", err)
	}
	mu.Lock()
	defer mu.Unlock()
	returned = true
	var got []string
	for _, d := range deltas {
		got = append(got, fmt.Sprintf("%s %s/%s", d.Type, d.Namespace, d.Name))
	}
	want := []string{"added a/one", "added b/two", "deleted a/one", "deleted b/two"}
	slices.Sort(got[:2])
	if !slices.Equal(got, want) {
		t.Fatalf("deltas %q; want %q", got, want)
	}
	for _, d := range deltas[2:] {
		if d.UID != types.UID("uid-"+d.Name) || resourceversion.Before(d.ResourceVersion, "12") {
			t.Errorf("delete of %s: uid %q, resourceVersion %q; want its uid, and at least 12", d.Name, d.UID, d.ResourceVersion)
		}
	}
}

// No more than ListConcurrency initial lists run at once, however many
// resources start, and Synced closes once all have synced.
func TestSetBoundsInitialLists(t *testing.T) {
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[schema.GroupVersionResource]string{}
	var resources []Resource
	for i := range 6 {
		r := Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: fmt.Sprintf("things%d", i)},
			Kind: fmt.Sprintf("Thing%d", i)}
		kinds[r.GroupVersionResource] = r.Kind + "List"
		resources = append(resources, r)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
	// Lists take a while, as on a real API server, so that the Sources
	// overlap when they may. (The fake answers one call at a time: what
	// is bounded, and counted, is the Sources between their start and
	// their initial list's end.)
	client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(50 * time.Millisecond)
		return false, nil, nil
	})
	events := &setEvents{}
	s := NewSet(client, discoveryOf(), SetOptions{Selection: sel, ListConcurrency: 2, Observer: events},
		emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.DiscardHandler))
	for _, r := range resources {
		s.members[r.GroupResource()] = s.newMember(r, false)
	}
	runUntilSynced(t, s, 20*time.Second, "with every list answered")
	events.mu.Lock()
	defer events.mu.Unlock()
	if m := slices.Max(events.inFlight); m != 2 || events.lists != 0 {
		t.Errorf("initial lists in flight peaked at %d, ended at %d (%v); want 2, then 0", m, events.lists, events.inFlight)
	}
}

// A resource waiting for its place among the initial lists has no
// stalled watch to report: its watches have not begun.
func TestSetQueuedWatchesNotStalled(t *testing.T) {
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(nil, discoveryOf(), SetOptions{Selection: sel, Source: Options{StallTimeout: time.Millisecond}},
		nil, nil, slog.New(slog.DiscardHandler))
	m := s.newMember(gizmos, false)
	s.members[gizmos.GroupResource()] = m
	deadline := time.Now().Add(5 * time.Second)
	for m.src.Healthy() == nil { // its health clock runs from its making
		if time.Now().After(deadline) {
			t.Fatal("the Source's watch never reported stalled")
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Healthy(); err != nil {
		t.Errorf("Healthy: %v; want nil while the resource waits for its place", err)
	}
	m.started.Store(true)
	if err := s.Healthy(); err == nil {
		t.Error("Healthy: nil once started and stalled; want the stall")
	}
}

// runUntilSynced runs s until it is synced, failing the test when it is
// not within timeout (why says what that would mean), then stops it and
// checks that Run returns nil.
func runUntilSynced(t *testing.T, s *Set, timeout time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Synced():
	case err := <-done:
		t.Fatalf("Run returned %v before the set was synced", err)
	case <-time.After(timeout):
		cancel()
		<-done
		t.Fatalf("Synced not closed within %s: %s", timeout, why)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v; want nil once ctx ended", err)
	}
}
