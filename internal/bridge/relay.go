package bridge

import (
	"context"
	"fmt"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/sink"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/source"
)

// relay is everything the source set reaches downstream of itself: it
// hands deltas on to the pipeline (source.Handler), loads positions
// through the checkpoint writer and store (source.Loader), prepares the
// sink for a resource (Prepare), and reads back what a state-layout bus
// holds (source.Bus).
//
// The set is made before the sink, since the resources it selects decide
// the sink's topics, and the pipeline, the writer and the store are made
// from the sink: the set cannot be given them when it is made. It is given
// the relay instead, and attach connects the relay to them once, after
// they are made and before the set is checked or run. The set calls none
// of the relay's methods before it runs.
type relay struct {
	metrics *metrics.Metrics
	// cluster is the cluster name the bus's messages carry.
	cluster string

	// Set once by attach.
	sink   sink.Sink
	store  checkpoint.Store
	writer *checkpoint.Writer
	pipe   *pipeline.Pipeline
}

var (
	_ source.Holder = (*relay)(nil)
	_ source.Loader = (*relay)(nil)
	_ source.Bus    = (*relay)(nil)
)

// attach connects r to what it hands on to. It is called once, before
// the set is checked or run.
func (r *relay) attach(e ends, writer *checkpoint.Writer, pipe *pipeline.Pipeline) {
	r.sink, r.store, r.writer, r.pipe = e.sink, e.store, writer, pipe
}

// OnDelta counts d and queues it for publishing.
func (r *relay) OnDelta(d source.Delta) {
	r.metrics.Observed(&d)
	r.pipe.OnDelta(d)
}

// StopHolding lets the source go on without waiting for room in the
// pipeline (see pipeline.Pipeline.StopHolding): the set calls it as it
// stops.
func (r *relay) StopHolding() { r.pipe.StopHolding() }

// Load returns what was published of resource. A resource's source may
// start again while the bridge runs (watched at another version, or
// served again): the positions acknowledged and not yet flushed are
// flushed first, so that it loads them too.
func (r *relay) Load(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
	if err := r.writer.Flush(ctx); err != nil {
		return checkpoint.Snapshot{}, err
	}
	return r.store.Load(ctx, resource)
}

// Prepare makes the sink ready for the deltas of res, a resource the set
// is about to watch (sink.Preparer).
func (r *relay) Prepare(ctx context.Context, res source.Resource) error {
	return prepare(ctx, r.sink, res)
}

// Holdings reads what the sink's state layout holds of res's objects in
// namespaces.
func (r *relay) Holdings(ctx context.Context, res source.Resource, namespaces []string) (map[string]source.Holding, error) {
	sr, ok := r.sink.(sink.StateReader)
	if !ok || !sr.HoldsState() {
		return nil, fmt.Errorf("bridge: the sink %T keeps no state to compare with", r.sink)
	}
	held := map[string]source.Holding{}
	err := sr.ReadState(ctx, r.cluster, res.GroupVersionResource, namespaces, func(h sink.Held) error {
		held[source.ObjectKey(h.Namespace, h.Name)] = source.Holding{UID: h.UID, ResourceVersion: h.ResourceVersion, Deleted: h.Deleted,
			Kind: h.Kind, APIVersion: h.APIVersion, View: h.View}
		return nil
	})
	return held, err
}

// prepare makes s ready for the deltas of res (sink.Preparer).
func prepare(ctx context.Context, s sink.Sink, res source.Resource) error {
	if p, ok := s.(sink.Preparer); ok {
		return p.Prepare(ctx, res.GroupVersionResource)
	}
	return nil
}

// holdsState reports whether the sink writes a state layout, before it is
// opened: a sink given with WithSink says so itself, otherwise the
// configuration does. Only then is the bus the record the source compares
// with the cluster (source.Options.Bus).
func (b *Bridge) holdsState() bool {
	if b.withSink != nil {
		sr, ok := b.withSink.(sink.StateReader)
		return ok && sr.HoldsState()
	}
	switch b.cfg.Sink {
	case config.SinkNATS:
		return b.cfg.NATS.Mode == natssink.ModeJetStream && b.cfg.NATS.Layout == natssink.LayoutState
	case config.SinkKafka:
		return b.cfg.Kafka.Layout == kafkasink.LayoutState
	}
	return false
}
