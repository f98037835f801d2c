package bridge

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/sink"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/sink/stdout"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// ends are the two ends of the bridge's delivery: the sink it publishes
// to, and the checkpoint store it records what was published in.
type ends struct {
	sink  sink.Sink
	store checkpoint.Store
	// releaseStore releases what the store was opened on, after the
	// store's own Close: the nats-kv checkpoint's own NATS connection. It
	// is nil when the store has nothing of its own to release.
	releaseStore func()
	// before are the resources, not watched, that the bus's discovery
	// document named when the sink was opened, in a state layout (see
	// publishedBefore); beforeErr is why it could not be read.
	before    []wire.DiscoveredResource
	beforeErr error
}

// openEnds opens the sink and the checkpoint store the configuration
// names, or takes those given with WithSink and WithStore. resources are
// the resources the set selected, followed whether the set follows the
// cluster (its selection has a pattern), and state whether the sink
// writes a state layout.
//
// A nats-kv checkpoint shares the NATS sink's connection when the bridge
// opened that sink itself; otherwise it opens a connection of its own. A
// Kafka sink is opened after the store when the store decides its
// options (see below).
//
// openEnds returns what it opened even when it fails: release closes it.
func (b *Bridge) openEnds(ctx context.Context, resources []source.Resource, followed, state bool) (ends, error) {
	e := ends{sink: b.withSink, store: b.withStore}
	var shared *nats.Conn
	if e.sink == nil {
		// The Kafka sink is told of every topic it may write when the
		// checkpoint holds resources no longer watched, whose deletes
		// go to their topics (see retireGone): its store needs no
		// connection of the sink's, so it is opened first.
		if b.cfg.Sink == config.SinkKafka && !followed && state {
			if e.store == nil {
				store, release, err := b.openStore(ctx, nil)
				if err != nil {
					return e, err
				}
				e.store, e.releaseStore = store, release
			}
			followed = unwatchedInCheckpoint(ctx, e.store, resources)
		}
		s, conn, err := b.openSink(ctx, resources, followed)
		if err != nil {
			return e, err
		}
		if state {
			e.before, e.beforeErr = publishedBefore(ctx, s, b.cfg.ClusterName, resources)
		}
		if b.cfg.Sink == config.SinkKafka && !followed && len(e.before) > 0 {
			// The bus's discovery document names resources no longer
			// watched that the checkpoint does not (one lost): their
			// topics may take deletes too (see retireGone). It takes a
			// change of the cluster or the configuration while the bridge
			// was down: the sink is opened again for them.
			if err := s.Close(ctx); err != nil {
				b.log.Warn("closing the Kafka sink, to open it again for the topics of resources published before", "err", err)
			}
			if s, conn, err = b.openSink(ctx, resources, true); err != nil {
				return e, err
			}
		}
		e.sink, shared = s, conn
	} else if state {
		e.before, e.beforeErr = publishedBefore(ctx, e.sink, b.cfg.ClusterName, resources)
	}
	if e.store == nil {
		store, release, err := b.openStore(ctx, shared)
		if err != nil {
			return e, err
		}
		e.store, e.releaseStore = store, release
	}
	return e, nil
}

// openSink opens the sink the configuration names. For a NATS sink it
// also returns the sink's connection, which a nats-kv checkpoint shares;
// nil for the others.
func (b *Bridge) openSink(ctx context.Context, resources []source.Resource, followed bool) (sink.Sink, *nats.Conn, error) {
	log := b.log.With("component", "sink")
	switch b.cfg.Sink {
	case config.SinkNATS:
		s, err := natssink.New(ctx, b.cfg.NATSSettings(), log)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Conn(), nil
	case config.SinkKafka:
		gvrs := make([]schema.GroupVersionResource, len(resources))
		for i, r := range resources {
			gvrs[i] = r.GroupVersionResource
		}
		opts := kafkasink.Options{ResourcesAdded: followed, TopicCompaction: b.metrics.KafkaTopicCompacted}
		s, err := kafkasink.New(ctx, b.cfg.KafkaSettings(), gvrs, opts, log)
		if err != nil {
			return nil, nil, err
		}
		return s, nil, nil
	default:
		return stdout.New(os.Stdout), nil, nil
	}
}

// openStore opens the checkpoint store the configuration names. A
// nats-kv store is opened on shared, the NATS sink's connection, when it
// is not nil, and on a connection of its own otherwise, which the
// function returned releases; that function is nil when the store has
// nothing of its own to release.
func (b *Bridge) openStore(ctx context.Context, shared *nats.Conn) (checkpoint.Store, func(), error) {
	log := b.log.With("component", "checkpoint")
	kind, arg := b.cfg.CheckpointKind()
	switch kind {
	case config.CheckpointFile:
		s, err := b.openFileStore(arg, log)
		if err != nil {
			return nil, nil, err
		}
		return s, nil, nil
	case config.CheckpointNATSKV:
		nc := shared
		var release func()
		if nc == nil {
			c, err := natssink.Connect(ctx, b.cfg.NATSSettings(), log)
			if err != nil {
				return nil, nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
			}
			nc, release = c, c.Close
		}
		s, err := natskv.Open(ctx, nc, arg, natskv.Options{Create: b.cfg.NATS.CreateStream, Replicas: b.cfg.NATS.StreamReplicas,
			Dropped: b.metrics.CheckpointRecordDropped}, log)
		if err != nil {
			if release != nil {
				release()
			}
			return nil, nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
		}
		return s, release, nil
	case config.CheckpointKafka:
		opts := b.cfg.KafkaCheckpoint()
		opts.Dropped = b.metrics.CheckpointRecordDropped
		s, err := kafkastore.Open(ctx, b.cfg.KafkaSettings().Conn(), arg, opts, log)
		if err != nil {
			return nil, nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
		}
		return s, nil, nil
	case config.CheckpointNone:
		return checkpoint.Discard(), nil, nil
	default:
		return nil, nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %q is not a checkpoint", b.cfg.Checkpoint)
	}
}
