package discoverydoc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// fakeBus is a bus of one cluster's documents: it holds the latest
// written, and fails writes as told.
type fakeBus struct {
	mu      sync.Mutex
	held    *wire.Discovery
	writes  []wire.Discovery // every write tried, failed or not
	fail    []error          // errors of the next writes, in order
	reads   int
	refresh time.Duration
}

func (b *fakeBus) WriteDiscovery(_ context.Context, d wire.Discovery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, d)
	if len(b.fail) > 0 {
		err := b.fail[0]
		b.fail = b.fail[1:]
		if err != nil {
			return err
		}
	}
	b.held = &d
	return nil
}

func (b *fakeBus) LastDiscovery(context.Context, string) (wire.Discovery, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	if b.held == nil {
		return wire.Discovery{}, false, nil
	}
	return *b.held, true, nil
}

func (b *fakeBus) DiscoveryRefresh() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refresh
}

// put is a write by another bridge (an old leader).
func (b *fakeBus) put(d wire.Discovery) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = &d
}

func (b *fakeBus) written() []wire.Discovery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.writes)
}

func (b *fakeBus) heldDoc() (wire.Discovery, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		return wire.Discovery{}, false
	}
	return *b.held, true
}

// fakeDiscovery describes every group-version with the resources it is
// asked of, as plural + "s" singular-less; it fails group-versions in
// failing.
type fakeDiscovery struct{}

func (fakeDiscovery) ServerResourcesForGroupVersionWithContext(_ context.Context, gv string) (*metav1.APIResourceList, error) {
	return &metav1.APIResourceList{GroupVersion: gv}, nil
}

// resources is the set of resources watched, changed by the test.
type resources struct {
	mu sync.Mutex
	rs []source.Resource
}

func (r *resources) get() []source.Resource {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rs)
}

func (r *resources) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rs = append(r.rs, resource(name))
}

func resource(name string) source.Resource {
	return source.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: name},
		Kind: "Kind" + name, Namespaced: true}
}

// harness runs a Publisher on bus until the test ends; changes tells it
// of changes of res.
type harness struct {
	bus     *fakeBus
	res     *resources
	changes chan struct{}
	p       *Publisher
}

func start(t *testing.T, bus *fakeBus, res *resources) *harness {
	t.Helper()
	h := &harness{bus: bus, res: res, changes: make(chan struct{}, 1)}
	p, err := New(Options{Cluster: "c", Resources: res.get, Changes: h.changes, Discovery: fakeDiscovery{}, Writer: bus}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

func (h *harness) change(name string) {
	h.res.add(name)
	select {
	case h.changes <- struct{}{}:
	default:
	}
}

func names(d wire.Discovery) []string {
	var out []string
	for _, r := range d.Resources {
		out = append(out, r.Resource)
	}
	return out
}

// doc is the document the publisher builds of res.
func doc(res ...string) wire.Discovery {
	d := wire.Discovery{Cluster: "c", Time: time.Unix(1, 0).UTC()}
	for _, r := range res {
		rs := resource(r)
		d.Resources = append(d.Resources, wire.DiscoveredResource{Group: rs.Group, Version: rs.Version, Resource: rs.Resource,
			Kind: rs.Kind, Namespaced: true, Singular: "kind" + r})
	}
	return d
}

func TestPublisherSkipsEqualDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{}
		bus.put(doc("as"))
		start(t, bus, &resources{rs: []source.Resource{resource("as")}})
		time.Sleep(time.Hour)
		synctest.Wait()
		if w := bus.written(); len(w) != 0 {
			t.Errorf("%d writes of a document the bus holds already, want none", len(w))
		}
	})
}

func TestPublisherWritesFirstDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{}
		bus.put(doc("as"))
		start(t, bus, &resources{rs: []source.Resource{resource("as"), resource("bs")}})
		synctest.Wait()
		held, _ := bus.heldDoc()
		if got := names(held); !slices.Equal(got, []string{"as", "bs"}) {
			t.Errorf("the bus holds %v, want [as bs]", got)
		}
	})
}

// A failed write is retried with the newest document: the resources that
// changed while the bus failed are in the next write, and no older
// document is written after it.
func TestPublisherRetriesWithNewestDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{fail: []error{errors.New("down"), errors.New("down"), errors.New("down")}}
		h := start(t, bus, &resources{rs: []source.Resource{resource("as")}})
		synctest.Wait()
		h.change("bs")
		time.Sleep(time.Minute)
		synctest.Wait()
		held, ok := bus.heldDoc()
		if !ok || !slices.Equal(names(held), []string{"as", "bs"}) {
			t.Fatalf("the bus holds %v (%t), want [as bs]", names(held), ok)
		}
		w := bus.written()
		if got := names(w[len(w)-1]); !slices.Equal(got, []string{"as", "bs"}) {
			t.Errorf("last write %v, want the newest document [as bs]", got)
		}
		if len(w) != 4 {
			t.Errorf("%d writes, want 3 failed and 1 that succeeded", len(w))
		}
	})
}

// A write no retry can fix is not retried; the next change tries again.
func TestPublisherTerminalWaitsForNextChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{fail: []error{sink.Terminal(errors.New("stream does not capture the subject"))}}
		h := start(t, bus, &resources{rs: []source.Resource{resource("as")}})
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(bus.written()); n != 1 {
			t.Fatalf("%d writes after a terminal error and no change, want 1", n)
		}
		h.change("bs")
		time.Sleep(time.Minute)
		synctest.Wait()
		held, ok := bus.heldDoc()
		if n := len(bus.written()); n != 2 || !ok || !slices.Equal(names(held), []string{"as", "bs"}) {
			t.Errorf("%d writes, the bus holds %v (%t), want a second write, of [as bs], after the change", n, names(held), ok)
		}
	})
}

// A steady trickle of changes, one every 100 ms, does not hold the
// document back past MaxDelay from the first.
func TestPublisherDelayCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{}
		h := start(t, bus, &resources{rs: []source.Resource{resource("as")}})
		synctest.Wait()
		first := len(bus.written())
		begin := time.Now()
		for i := 0; len(bus.written()) == first; i++ {
			if since := time.Since(begin); since > DefaultMaxDelay+time.Second {
				t.Fatalf("no document %s after the first of changes every 100 ms, want one within %s", since, DefaultMaxDelay)
			}
			h.change(fmt.Sprintf("r%03ds", i))
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if since := time.Since(begin); since > DefaultMaxDelay+100*time.Millisecond {
			t.Errorf("document after %s, want within %s", since, DefaultMaxDelay)
		}
	})
}

// An old leader's write that lands after the publisher read the bus is
// replaced by the publisher's document.
func TestPublisherRereadsAfterOldLeadersWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{}
		bus.put(doc("as"))
		start(t, bus, &resources{rs: []source.Resource{resource("as")}})
		synctest.Wait()
		bus.put(doc("old")) // in flight from the old leader
		time.Sleep(time.Hour)
		synctest.Wait()
		held, _ := bus.heldDoc()
		if got := names(held); !slices.Equal(got, []string{"as"}) {
			t.Errorf("the bus holds %v, the old leader's, want the publisher's [as]", got)
		}
	})
}

// A bus that expires documents gets the document again, unchanged, every
// refresh interval.
func TestPublisherRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{refresh: time.Hour}
		start(t, bus, &resources{rs: []source.Resource{resource("as")}})
		synctest.Wait()
		time.Sleep(3*time.Hour + time.Minute)
		synctest.Wait()
		if n := len(bus.written()); n != 4 {
			t.Errorf("%d writes in 3 h with a refresh of 1 h, want 4", n)
		}
	})
}

// Resources kept (published before, not watched) are named as they are
// given, after those watched; one that is watched again is named once, as
// a resource watched.
func TestPublisherKeepsResourcesPublishedBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &fakeBus{}
		gone := wire.DiscoveredResource{Group: "gone.example.com", Version: "v2", Resource: "widgets", Kind: "Widget", Namespaced: true,
			Columns: []wire.PrinterColumn{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}}}
		again := doc("bs").Resources[0]
		again.Kind = "Stale"
		p, err := New(Options{Cluster: "c", Resources: (&resources{rs: []source.Resource{resource("as"), resource("bs")}}).get,
			Keep:      func() []wire.DiscoveredResource { return []wire.DiscoveredResource{gone, again} },
			Discovery: fakeDiscovery{}, Writer: bus}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		held, _ := bus.heldDoc()
		want := append(doc("as", "bs").Resources, gone)
		if len(held.Resources) != len(want) {
			t.Fatalf("the bus holds %v, want [as bs widgets]", names(held))
		}
		for i := range want {
			if !reflect.DeepEqual(held.Resources[i], want[i]) {
				t.Errorf("resource %d: %+v, want %+v", i, held.Resources[i], want[i])
			}
		}
	})
}
