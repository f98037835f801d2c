package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// docSink is a sink whose bus holds doc as its cluster's discovery
// document (none when found is false, an error when readErr is set), and
// that cannot take the deletes of the resources in refuse.
type docSink struct {
	doc     wire.Discovery
	found   bool
	readErr error
	refuse  map[string]bool
}

func (*docSink) Publish(context.Context, []*wire.Message) error       { return nil }
func (*docSink) Close(context.Context) error                          { return nil }
func (*docSink) WriteDiscovery(context.Context, wire.Discovery) error { return nil }

func (s *docSink) LastDiscovery(context.Context, string) (wire.Discovery, bool, error) {
	return s.doc, s.found, s.readErr
}

func (s *docSink) Prepare(_ context.Context, res schema.GroupVersionResource) error {
	if s.refuse[res.GroupResource().String()] {
		return errors.New("refused")
	}
	return nil
}

// opened are the ends of s as openEnds leaves them in a state layout,
// with no checkpoint: the bus's document read as the sink was opened.
func opened(t *testing.T, s *docSink, watched []source.Resource) ends {
	e := ends{sink: s, store: checkpoint.Discard()}
	e.before, e.beforeErr = publishedBefore(t.Context(), s, "c", watched)
	return e
}

// collected gathers the deltas handed on.
type collected struct {
	mu     sync.Mutex
	deltas []source.Delta
}

func (c *collected) OnDelta(d source.Delta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deltas = append(c.deltas, d)
}

// TestRetireGoneFromTheBusDocument: with no checkpoint, the resources the
// bus's discovery document names and the bridge does not watch are
// settled as follows. One the cluster no longer serves has the delete of
// each of its live objects on the bus handed on; one the sink cannot take
// the deletes of, and one selected but not watched, are kept, so that the
// start's document names them still; one still served that the selection
// leaves out is left, and not kept; kept come in the order of their names.
// A document that cannot be read makes the start keep all it named
// (unread).
func TestRetireGoneFromTheBusDocument(t *testing.T) {
	cfg, err := config.Load([]string{"BRIDGE_CLUSTER_NAME=c", "BRIDGE_RESOURCES=configmaps,*.served.example.com", "BRIDGE_EXCLUDE_RESOURCES=others.served.example.com", "BRIDGE_CHECKPOINT=none"})
	if err != nil {
		t.Fatal(err)
	}
	b := New(cfg, nil, slog.New(slog.NewTextHandler(t.Output(), nil)), WithMetrics(metrics.New()))

	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disc.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}}},
		{GroupVersion: "served.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "things", Kind: "Thing", Namespaced: true},
			{Name: "others", Kind: "Other", Namespaced: true},
		}},
	}
	watched := []source.Resource{{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}}
	doc := wire.Discovery{Cluster: "c", Resources: []wire.DiscoveredResource{
		{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true},
		{Group: "served.example.com", Version: "v1", Resource: "things", Kind: "Thing", Namespaced: true},
		{Group: "served.example.com", Version: "v1", Resource: "others", Kind: "Other", Namespaced: true},
		{Group: "gone.example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true},
		{Group: "refused.example.com", Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true},
	}}
	held := map[string]map[string]source.Holding{
		"widgets.gone.example.com": {
			"ns/a": {UID: "u-a", ResourceVersion: "10"},
			"ns/b": {UID: "u-b", ResourceVersion: "11"},
			"ns/c": {UID: "u-c", ResourceVersion: "12", Deleted: true},
		},
		"gadgets.refused.example.com": {"ns/d": {UID: "u-d", ResourceVersion: "13"}},
		"others.served.example.com":   {"ns/e": {UID: "u-e", ResourceVersion: "14"}},
	}
	bus := source.BusFunc(func(_ context.Context, res source.Resource, _ []string) (map[string]source.Holding, error) {
		return held[res.Name()], nil
	})

	t.Run("document read", func(t *testing.T) {
		s := &docSink{doc: doc, found: true, refuse: map[string]bool{"gadgets.refused.example.com": true}}
		var h collected
		r, err := b.retireGone(t.Context(), disc, opened(t, s, watched), watched, bus, &h)
		if err != nil {
			t.Fatal(err)
		}
		var deletes []string
		for _, d := range h.deltas {
			deletes = append(deletes, fmt.Sprintf("%s %s/%s %s %s", d.Resource.Name(), d.Namespace, d.Name, d.Type, d.Reason))
		}
		slices.Sort(deletes)
		want := []string{
			"widgets.gone.example.com ns/a deleted reconciled",
			"widgets.gone.example.com ns/b deleted reconciled",
		}
		if !slices.Equal(deletes, want) {
			t.Errorf("handed on %q, want %q", deletes, want)
		}
		if r.deleted != 2 || r.unread {
			t.Errorf("deleted %d, unread %t; want 2, false", r.deleted, r.unread)
		}
		var kept []string
		for _, k := range r.kept {
			kept = append(kept, resourceOf(k).Name())
		}
		if want := []string{"gadgets.refused.example.com", "things.served.example.com"}; !slices.Equal(kept, want) {
			t.Errorf("kept %q, want %q", kept, want)
		}
	})

	t.Run("document unread", func(t *testing.T) {
		s := &docSink{readErr: errors.New("bus away")}
		var h collected
		r, err := b.retireGone(t.Context(), disc, opened(t, s, watched), watched, bus, &h)
		if err != nil {
			t.Fatal(err)
		}
		if !r.unread || len(r.kept) != 0 || len(h.deltas) != 0 {
			t.Errorf("unread %t, kept %d, %d deltas handed on; want true, 0, 0", r.unread, len(r.kept), len(h.deltas))
		}
	})
}

// flakySink fails its first reads of the discovery document.
type flakySink struct {
	docSink
	mu    sync.Mutex
	fails int
}

func (s *flakySink) LastDiscovery(ctx context.Context, cluster string) (wire.Discovery, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return wire.Discovery{}, false, errors.New("bus away")
	}
	return s.docSink.LastDiscovery(ctx, cluster)
}

// A start that could not read the bus's discovery document reads it again
// before it publishes its own, and keeps every resource the old one named
// that it does not watch; one that cannot read it for discoveryReread
// keeps none.
func TestRereadDiscovery(t *testing.T) {
	cfg, err := config.Load([]string{"BRIDGE_CLUSTER_NAME=c", "BRIDGE_RESOURCES=configmaps", "BRIDGE_CHECKPOINT=none"})
	if err != nil {
		t.Fatal(err)
	}
	b := New(cfg, nil, slog.New(slog.NewTextHandler(t.Output(), nil)), WithMetrics(metrics.New()))
	watched := []source.Resource{{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}
	doc := wire.Discovery{Cluster: "c", Resources: []wire.DiscoveredResource{
		{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true},
		{Group: "gone.example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true},
	}}
	synctest.Test(t, func(t *testing.T) {
		s := &flakySink{docSink: docSink{doc: doc, found: true}, fails: 3}
		kept, ok := b.rereadDiscovery(t.Context(), s, watched)
		if !ok || len(kept) != 1 || kept[0].Resource != "widgets" {
			t.Errorf("after 3 failed reads: kept %+v, ok %t; want widgets, true", kept, ok)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := &flakySink{docSink: docSink{doc: doc, found: true}, fails: 1 << 30}
		start := time.Now()
		kept, ok := b.rereadDiscovery(t.Context(), s, watched)
		if !ok || len(kept) != 0 || time.Since(start) < discoveryReread {
			t.Errorf("reads that never succeed: kept %+v, ok %t after %s; want none, true after %s", kept, ok, time.Since(start), discoveryReread)
		}
	})
}
