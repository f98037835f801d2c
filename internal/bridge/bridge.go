// Package bridge wires a source, a pipeline, a sink and a checkpoint into
// one process with one lifecycle.
//
// Run blocks until its context ends, then shuts down in two stages: the
// informers stop, deltas already queued are published for up to
// ShutdownTimeout (the soft stage), anything still unpublished is abandoned
// (the hard stage; it was never checkpointed, so the next start publishes
// it), and finally the checkpoint is flushed. A bridge stopped this way
// and started again publishes nothing twice.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/stdout"
	"github.com/kubebus/bridge/source"
)

// Bridge is one configured bridge.
type Bridge struct {
	cfg   *config.Config
	rest  *rest.Config
	log   *slog.Logger
	sink  sink.Sink
	store checkpoint.Store
	ready chan struct{}
}

// Option changes how New builds a Bridge.
type Option func(*Bridge)

// WithSink publishes to s instead of the sink the configuration names.
func WithSink(s sink.Sink) Option { return func(b *Bridge) { b.sink = s } }

// WithStore keeps the checkpoint in s instead of the store the
// configuration names.
func WithStore(s checkpoint.Store) Option { return func(b *Bridge) { b.store = s } }

// New returns a bridge for cfg that talks to the API server rc points at.
func New(cfg *config.Config, rc *rest.Config, log *slog.Logger, opts ...Option) *Bridge {
	b := &Bridge{cfg: cfg, rest: rc, log: log, ready: make(chan struct{})}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Ready is closed once the initial list of every resource has been
// compared with the checkpoint and everything that comparison found has
// been published.
func (b *Bridge) Ready() <-chan struct{} { return b.ready }

// Run runs the bridge until ctx ends. Errors that come from the
// configuration wrap source.ErrUnknownResource or source.ErrBadSelector.
func (b *Bridge) Run(ctx context.Context) error {
	dc, err := discovery.NewDiscoveryClientForConfig(b.rest)
	if err != nil {
		return fmt.Errorf("bridge: discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(b.rest)
	if err != nil {
		return fmt.Errorf("bridge: dynamic client: %w", err)
	}
	resources, err := source.Resolve(dc, b.cfg.Resources)
	if err != nil {
		return fmt.Errorf("bridge: BRIDGE_RESOURCES: %w", err)
	}
	for _, r := range resources {
		b.log.Info("watching", "resource", r.Name(), "version", r.Version, "kind", r.Kind, "namespaced", r.Namespaced)
	}

	if b.store == nil {
		if b.store, err = openStore(b.cfg); err != nil {
			return err
		}
	}
	defer b.store.Close()
	if b.sink == nil {
		b.sink = stdout.New(os.Stdout)
	}
	defer b.sink.Close()

	writer := checkpoint.NewWriter(b.store, b.cfg.CheckpointInterval, b.log.With("component", "checkpoint"))
	pipe := pipeline.New(b.sink, event.Encoder{Cluster: b.cfg.ClusterName}, writer, pipeline.Options{
		Workers:             b.cfg.Workers,
		BatchSize:           b.cfg.BatchSize,
		MaxPendingPerObject: b.cfg.MaxPendingPerObject,
		MaxRetryInterval:    b.cfg.RetryMaxInterval,
	}, b.log.With("component", "pipeline"))
	src := source.New(dyn, source.Options{
		Resources:         resources,
		Namespaces:        b.cfg.Namespaces,
		LabelSelector:     b.cfg.LabelSelector,
		FieldSelector:     b.cfg.FieldSelector,
		KeepManagedFields: b.cfg.KeepManagedFields,
		OldObject:         b.cfg.OldObject,
	}, b.store, pipe, b.log.With("component", "source"))

	if err := src.Check(ctx); err != nil {
		if errors.Is(err, source.ErrBadSelector) {
			return fmt.Errorf("bridge: %s: %w", selectorVars(b.cfg), err)
		}
		return fmt.Errorf("bridge: %w", err)
	}

	// The pipeline and the checkpoint writer outlive the source: they get
	// their own contexts, ended in order after the source stops.
	pipeCtx, stopPipe := context.WithCancel(context.WithoutCancel(ctx))
	writerCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = pipe.Run(pipeCtx) })
	var writerErr error
	var writerWG sync.WaitGroup
	writerWG.Go(func() { writerErr = writer.Run(writerCtx) })

	srcCtx, stopSrc := context.WithCancel(ctx)
	defer stopSrc()
	go func() {
		select {
		case <-src.Synced():
		case <-srcCtx.Done():
			return
		}
		if pipe.Drain(srcCtx) == nil {
			b.log.Info("ready: initial state published")
			close(b.ready)
		}
	}()

	srcErr := src.Run(srcCtx)

	// Soft stop: publish what is queued, up to the deadline.
	start := time.Now()
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.ShutdownTimeout)
	drainErr := pipe.Drain(drainCtx)
	cancel()
	if drainErr != nil {
		b.log.Warn("shutdown deadline reached; stopping with deltas unpublished", "err", drainErr)
	}
	// Hard stop.
	stopPipe()
	wg.Wait()
	stopWriter()
	writerWG.Wait()

	st := pipe.Stats()
	ws := writer.Stats()
	b.log.Info("stopped", "took", time.Since(start).Round(time.Millisecond),
		"published", st.Published, "skipped", st.Skipped, "retried", st.Retried,
		"coalesced", st.Coalesced, "abandoned", st.Abandoned, "relists", src.Relists(),
		"checkpointFlushes", ws.Flushes)
	if srcErr != nil {
		return fmt.Errorf("bridge: %w", srcErr)
	}
	if writerErr != nil {
		return fmt.Errorf("bridge: final checkpoint flush: %w", writerErr)
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

func openStore(cfg *config.Config) (checkpoint.Store, error) {
	switch kind, arg := cfg.CheckpointKind(); kind {
	case config.CheckpointFile:
		s, err := checkpoint.OpenFile(arg)
		if err != nil {
			return nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
		}
		return s, nil
	case config.CheckpointNone:
		return checkpoint.Discard(), nil
	default:
		return nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %q is not a checkpoint", cfg.Checkpoint)
	}
}
