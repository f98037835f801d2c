package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/view"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
)

// The functions here build the bridge's parts, each returning what it
// built; Run calls them in the order the parts depend on each other.

// clients are the API server's clients the source set reads with.
type clients struct {
	disc *discovery.DiscoveryClient
	// rest serves both of the source's paths: the raw path reads with
	// it, the parsed path through dyn, a dynamic client on it. Its
	// transport tells the source how each watch ended and whether a list
	// still makes progress (see source.WrapTransport).
	rest *rest.RESTClient
	dyn  dynamic.Interface
	// follow is a plain client, for the informers with which the set
	// follows the cluster's CRDs and API services.
	follow dynamic.Interface
}

// newClients makes the clients on rc.
func newClients(rc *rest.Config) (clients, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return clients{}, fmt.Errorf("bridge: discovery client: %w", err)
	}
	srcRest := rest.CopyConfig(rc)
	srcRest.Wrap(source.WrapTransport)
	raw, err := source.NewRESTClient(srcRest)
	if err != nil {
		return clients{}, fmt.Errorf("bridge: %w", err)
	}
	follow, err := dynamic.NewForConfig(rc)
	if err != nil {
		return clients{}, fmt.Errorf("bridge: %w", err)
	}
	return clients{disc: dc, rest: raw, dyn: dynamic.New(raw), follow: follow}, nil
}

// newView makes the view the objects are published through. Without
// BRIDGE_FILTER, BRIDGE_FIELDS or BRIDGE_DROP_FIELDS it hands objects on
// as they come, and still tells a position recorded through an earlier
// view from one recorded without.
func (b *Bridge) newView() *view.Definition {
	return view.New(b.cfg.ViewDefinition(), b.metrics, b.log.With("component", "view"))
}

// newSet makes the source set and selects its resources. It hands its
// deltas to down, loads positions through it, compares the cluster with
// bus, which is nil unless the sink writes a state layout, and signals on
// changed each change of the resources it watches. Errors that come from
// the configuration wrap source.ErrUnknownResource.
func (b *Bridge) newSet(ctx context.Context, cl clients, vw *view.Definition, down *relay, bus source.Bus, changed chan struct{}) (*source.Set, error) {
	sel := b.cfg.Selection()
	set := source.NewSet(cl.dyn, cl.disc, source.SetOptions{
		Selection:       sel,
		ListConcurrency: b.cfg.ListConcurrency,
		Follow:          cl.follow,
		Observer:        watchChanges{SetObserver: b.metrics, changed: changed},
		Prepare:         down.Prepare,
		Source: source.Options{
			Namespaces:        b.cfg.Namespaces,
			LabelSelector:     b.cfg.LabelSelector,
			FieldSelector:     b.cfg.FieldSelector,
			KeepManagedFields: b.cfg.KeepManagedFields,
			OldObject:         b.cfg.OldObject,
			Observer:          b.metrics,
			Discovery:         cl.disc,
			StallTimeout:      b.cfg.WatchStallTimeout,
			// The raw path by default: objects go to the bus as the API
			// server sent them, never decoded. BRIDGE_OLD_OBJECT needs the
			// previous state decoded, and so the parsed path (the source
			// decides it from OldObject).
			REST: cl.rest,
			View: vw,
			// In a state layout the bus is the record: compared with
			// the checkpoint at start, and with the cluster while the
			// bridge runs (see reconciler).
			Bus: bus,
		},
	}, down, down, b.log.With("component", "source"))
	if err := set.Select(ctx); err != nil {
		if errors.Is(err, source.ErrUnknownResource) {
			return nil, fmt.Errorf("bridge: BRIDGE_RESOURCES: %w", err)
		}
		return nil, fmt.Errorf("bridge: discovery: %w", err)
	}
	if unmatched := set.UnmatchedExclusions(); len(unmatched) > 0 {
		b.log.Warn("BRIDGE_EXCLUDE_RESOURCES: exclusions that match no resource the API server serves; misspelt?", "exclusions", unmatched)
	}
	resources := set.Resources()
	b.log.Info("selected resources", "selection", sel.String(), "resources", len(resources), "followsCluster", sel.Patterned())
	for _, r := range resources {
		b.log.Info("watching", "resource", r.Name(), "version", r.Version, "kind", r.Kind, "namespaced", r.Namespaced)
	}
	return set, nil
}

// newPipeline makes the checkpoint writer on e's store and the pipeline
// that publishes to e's sink and records through the writer.
func (b *Bridge) newPipeline(e ends) (*checkpoint.Writer, *pipeline.Pipeline) {
	writer := checkpoint.NewWriter(e.store, b.cfg.CheckpointInterval, b.log.With("component", "checkpoint"))
	pipe := pipeline.New(e.sink, event.Encoder{Cluster: b.cfg.ClusterName, KeepManagedFields: b.cfg.KeepManagedFields}, writer, pipeline.Options{
		Workers:             b.cfg.Workers,
		BatchSize:           b.cfg.BatchSize,
		MaxPendingPerObject: b.cfg.MaxPendingPerObject,
		MaxPendingBytes:     b.cfg.MaxPendingBytes,
		MaxRetryInterval:    b.cfg.RetryMaxInterval,
		Observer:            b.metrics,
		Intents:             writer,
	}, b.log.With("component", "pipeline"))
	return writer, pipe
}

// watch has the metrics read the bridge's gauges from what was built, and
// logs the view when one is defined.
func (b *Bridge) watch(set *source.Set, resources []source.Resource, vw *view.Definition, s sink.Sink, writer *checkpoint.Writer, pipe *pipeline.Pipeline) {
	b.metrics.Watch(metrics.Gauges{
		PendingDeltas:  func() float64 { return float64(pipe.Stats().Pending) },
		PendingBytes:   func() float64 { return float64(pipe.Stats().PendingBytes) },
		HeldSeconds:    func() float64 { return pipe.Stats().HeldFor.Seconds() },
		Holding:        func() float64 { return float64(pipe.Stats().Holding) },
		CheckpointLag:  func() float64 { return float64(writer.Stats().Pending) },
		LastCheckpoint: writer.LastFlush,
		SinkUp: func() float64 {
			if hc, ok := s.(sink.HealthChecker); ok && hc.Health() != nil {
				return 0
			}
			return 1
		},
	})
	if vw.Defined() {
		for _, res := range resources {
			b.metrics.ViewResource(res.Name())
		}
		b.log.Info("publishing a view of the objects", "filter", b.cfg.View.Filter, "fields", b.cfg.View.Fields,
			"dropFields", b.cfg.View.DropFields, "definition", vw.ID())
	}
	b.metrics.Watches(set.Watches)
}

// check checks the set's resources (source.Set.Check). Errors that come
// from the configuration wrap source.ErrBadSelector and name the
// selector variables set.
func (b *Bridge) check(ctx context.Context, set *source.Set) error {
	if err := set.Check(ctx); err != nil {
		if errors.Is(err, source.ErrBadSelector) {
			return fmt.Errorf("bridge: %s: %w", selectorVars(b.cfg), err)
		}
		return fmt.Errorf("bridge: %w", err)
	}
	return nil
}

// selectorVars names the selector variables that are set.
func selectorVars(cfg *config.Config) string {
	var vars []string
	if cfg.LabelSelector != "" {
		vars = append(vars, "BRIDGE_LABEL_SELECTOR")
	}
	if cfg.FieldSelector != "" {
		vars = append(vars, "BRIDGE_FIELD_SELECTOR")
	}
	return strings.Join(vars, " or ")
}
