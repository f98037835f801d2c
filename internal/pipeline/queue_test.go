package pipeline

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
)

// TestAppendKey checks that an object's key in the pipeline is its
// resource's name, "/" and its key, for namespaced and cluster-scoped
// resources, with and without a group.
func TestAppendKey(t *testing.T) {
	deployments := source.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespaced: true}
	nodes := source.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}}
	crds := source.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}}
	for _, d := range []source.Delta{
		{Resource: configmaps, Namespace: "kube-system", Name: "coredns"},
		{Resource: deployments, Namespace: "default", Name: "web-with-a-name-longer-than-a-short-buffer-would-hold"},
		{Resource: nodes, Name: "node-1"},
		{Resource: crds, Name: "widgets.example.com"},
	} {
		key, res := appendKey(nil, &d)
		o := &object{key: string(key), res: res}
		if want := d.Resource.Name() + "/" + d.Key(); o.key != want {
			t.Errorf("key %q, want %q", o.key, want)
		}
		if o.resource() != d.Resource.Name() || o.objectKey() != d.Key() {
			t.Errorf("%q: resource %q and key %q, want %q and %q", o.key, o.resource(), o.objectKey(), d.Resource.Name(), d.Key())
		}
	}
}

// TestGoneObjectComesOffTheQueue checks that an object queued again while
// its last batch was in flight, and removed when that batch finished,
// comes off the queue with nothing to take, and leaves alone the object
// that took its key since.
func TestGoneObjectComesOffTheQueue(t *testing.T) {
	h := newHarness(t, &sinktest.Recorder{}, Options{}, nil)
	p := h.p
	p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	o, _ := p.queue.Get()
	p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2)) // queued again while taken
	if items := takeOf(p, o); len(items) != 2 {
		t.Fatalf("took %d deltas, want 2", len(items))
	}
	p.finish([]*object{o})
	if !o.gone || p.Stats().Pending != 0 {
		t.Fatalf("object not removed once done: gone %v, %d pending", o.gone, p.Stats().Pending)
	}
	p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 3)) // a new object for a
	stale, _ := p.queue.Get()
	if stale != o {
		t.Fatal("the removed object did not come off the queue first")
	}
	if items := takeOf(p, stale); len(items) != 0 {
		t.Errorf("took %d deltas of a removed object", len(items))
	}
	p.finish([]*object{stale})
	if n := p.Stats().Pending; n != 1 {
		t.Fatalf("%d objects pending after the removed one finished, want the new one", n)
	}

	h.start(t)
	h.drain(t)
	if got := h.rec.rvsOf(subject("a")); !slices.Equal(got, []int{3}) {
		t.Errorf("a: recorded %v, want [3]", got)
	}
}

// TestFirstDeltaLeavesNothingBehind checks that an object whose first
// delta moves on to make room for more keeps no copy of it.
func TestFirstDeltaLeavesNothingBehind(t *testing.T) {
	h := newHarness(t, &sinktest.Recorder{}, Options{}, nil)
	h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2))
	h.p.mu.Lock()
	o := h.p.objects[configmaps.Name()+"/"+subject("a")]
	h.p.mu.Unlock()
	if len(o.pending) != 2 || o.pending[0].ResourceVersion != "1" {
		t.Fatalf("pending %v, want deltas 1 and 2", o.pending)
	}
	if o.firstDelta[0].Object != nil {
		t.Error("the first delta's object is still held where it first waited")
	}
}

// TestFirstDeltaLeavesNothingBehindOnceDone checks that an object whose
// first delta was published while another waited keeps no copy of the
// published one.
func TestFirstDeltaLeavesNothingBehindOnceDone(t *testing.T) {
	h := newHarness(t, &sinktest.Recorder{}, Options{}, nil)
	p := h.p
	p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	o, _ := p.queue.Get()
	takeOf(p, o)
	p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2)) // waits while 1 is in flight
	p.finish([]*object{o})
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(o.pending) != 1 || o.pending[0].ResourceVersion != "2" {
		t.Fatalf("pending %v, want delta 2", o.pending)
	}
	if o.firstDelta[0].Object != nil {
		t.Error("the published first delta's object is still held where it first waited")
	}
}

// TestReusedObjectComesOffTheQueue checks that, with an object removed
// while queued again, the deltas of objects created since each go to one
// batch, once.
func TestReusedObjectComesOffTheQueue(t *testing.T) {
	for range 20 {
		h := newHarness(t, &sinktest.Recorder{}, Options{}, nil)
		p := h.p
		p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
		o, _ := p.queue.Get()
		p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2)) // queued again while taken
		takeOf(p, o)
		p.finish([]*object{o})

		// New objects, one of which may be the removed one.
		for i := range 3 {
			name := "b-" + strconv.Itoa(i)
			p.OnDelta(mkDelta(source.Added, name, "uid-"+name, 1))
		}
		taken := map[string]int{}
		for p.queue.Len() > 0 {
			o, _ := p.queue.Get()
			for _, it := range takeOf(p, o) {
				if it.obj != o || it.obj.objectKey() != it.delta.Key() {
					t.Fatalf("delta of %s taken with object %q", it.delta.Key(), it.obj.key)
				}
				taken[it.delta.Name]++
			}
			p.finish([]*object{o})
		}
		if want := map[string]int{"b-0": 1, "b-1": 1, "b-2": 1}; !maps.Equal(taken, want) {
			t.Fatalf("taken %v, want %v", taken, want)
		}
		if n := p.Stats().Pending; n != 0 {
			t.Fatalf("%d objects pending once all was taken and finished", n)
		}
	}
}

// takeOf takes the waiting deltas of o, as a batch of o alone.
func takeOf(p *Pipeline, o *object) []item {
	b := &batch{}
	p.take(b, o)
	return b.items
}
