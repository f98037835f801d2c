// Package bridge wires a source, a pipeline, a sink and a checkpoint into
// one process with one lifecycle.
//
// Run blocks until its context ends, then shuts down within one budget,
// ShutdownTimeout from the moment its context ended (see package
// shutdown): the informers stop, deltas already queued are published until
// the drain's share of the budget ends or the hard-stop context does (the
// soft stage; see WithHardStop), anything still unpublished is abandoned
// and counted (the hard stage; it was never checkpointed, so the next
// start publishes it), the checkpoint is flushed within the flush's share,
// and the store and the sink are closed within the exit's; Run has
// returned by then. A bridge stopped this way and started again publishes
// nothing twice.
//
// A checkpoint store found damaged while running (checkpoint.IsTerminal,
// such as a file whose pages were overwritten) ends Run with the store's
// error, which names the file and says what to do: nothing published from
// then on could be checkpointed. The informers stop at once; the deletes
// and updates already queued are still published, within the drain's
// share of ShutdownTimeout, as they need no checkpoint and would otherwise be lost
// (the next start refuses the damaged file, and a fresh start no longer
// knows what was deleted); the creations queued are abandoned, as none is
// published before the checkpoint holds its intent. Their positions are
// not recorded.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/leader"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/shutdown"
	"github.com/kubebus/bridge/internal/view"
	"github.com/kubebus/bridge/sink"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/sink/stdout"
	"github.com/kubebus/bridge/source"
)

// errCheckpointBroken is the cause the source is stopped with when the
// checkpoint writer stopped on a damaged store.
var errCheckpointBroken = errors.New("bridge: the checkpoint store is damaged")

// Bridge is one configured bridge.
type Bridge struct {
	cfg     *config.Config
	rest    *rest.Config
	log     *slog.Logger
	sink    sink.Sink
	store   checkpoint.Store
	metrics *metrics.Metrics
	hard    context.Context
	budget  *shutdown.Budget
	ready   chan struct{}
	// src is the running set of sources, for Readiness; nil before Run
	// makes it.
	src atomic.Pointer[source.Set]
}

// Option changes how New builds a Bridge.
type Option func(*Bridge)

// WithSink publishes to s instead of the sink the configuration names.
func WithSink(s sink.Sink) Option { return func(b *Bridge) { b.sink = s } }

// WithStore keeps the checkpoint in s instead of the store the
// configuration names.
func WithStore(s checkpoint.Store) Option { return func(b *Bridge) { b.store = s } }

// WithMetrics records the bridge's metrics in m.
func WithMetrics(m *metrics.Metrics) Option { return func(b *Bridge) { b.metrics = m } }

// WithBudget counts the shutdown's stages from the stop budget measures
// (see package shutdown), so that the caller's own last stages (the
// lease's release, the HTTP server's shutdown) share the same deadline.
// Without this option Run measures BRIDGE_SHUTDOWN_TIMEOUT from the end
// of its context.
func WithBudget(budget *shutdown.Budget) Option { return func(b *Bridge) { b.budget = budget } }

// WithHardStop ends the soft stage of the shutdown when hard ends, rather
// than at the drain's deadline: what is not yet published is abandoned at
// once, the number abandoned is logged, and the checkpoint is still
// flushed. hard ending does not end Run on its own: make Run's context a
// child of hard, or end both. Without this option only the drain's
// deadline ends the soft stage.
func WithHardStop(hard context.Context) Option { return func(b *Bridge) { b.hard = hard } }

// New returns a bridge for cfg that talks to the API server rc points at.
func New(cfg *config.Config, rc *rest.Config, log *slog.Logger, opts ...Option) *Bridge {
	b := &Bridge{cfg: cfg, rest: rc, log: log, hard: context.Background(), ready: make(chan struct{})}
	for _, o := range opts {
		o(b)
	}
	if b.metrics == nil {
		b.metrics = metrics.New()
	}
	return b
}

// Ready is closed once the initial list of every resource has been
// compared with the checkpoint and everything that comparison found has
// been published.
func (b *Bridge) Ready() <-chan struct{} { return b.ready }

// Readiness is nil once the bridge is ready (see Ready), while every watch
// hears from the API server and works (source.Source.Healthy: a watch that
// heard nothing, or kept failing, for longer than
// BRIDGE_WATCH_STALL_TIMEOUT makes the bridge not ready), and while its
// sink reports itself healthy; otherwise it says what is missing.
func (b *Bridge) Readiness() error {
	select {
	case <-b.ready:
	default:
		return errors.New("bridge: initial state not published yet")
	}
	if src := b.src.Load(); src != nil {
		if err := src.Healthy(); err != nil {
			return err
		}
	}
	if hc, ok := b.sink.(sink.HealthChecker); ok {
		if err := hc.Health(); err != nil {
			return err
		}
	}
	return nil
}

// Run runs the bridge until ctx ends. Errors that come from the
// configuration wrap source.ErrUnknownResource or source.ErrBadSelector.
func (b *Bridge) Run(ctx context.Context) error {
	budget := b.budget
	if budget == nil {
		budget = shutdown.Watch(ctx, b.cfg.ShutdownTimeout)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(b.rest)
	if err != nil {
		return fmt.Errorf("bridge: discovery client: %w", err)
	}
	// The source's transport tells it how each watch ended and whether a
	// list still makes progress (see source.WrapTransport).
	srcRest := rest.CopyConfig(b.rest)
	srcRest.Wrap(source.WrapTransport)
	// One REST client serves both of the source's paths: the raw path
	// reads with it, the parsed path through a dynamic client on it.
	rc, err := source.NewRESTClient(srcRest)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	dyn := dynamic.New(rc)
	// The set follows the cluster's CRDs and API services with informers
	// of their own, on a plain client.
	follow, err := dynamic.NewForConfig(b.rest)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	// The view: without BRIDGE_FILTER, BRIDGE_FIELDS or BRIDGE_DROP_FIELDS
	// it hands objects on as they come, and still tells a position
	// recorded through an earlier view from one recorded without.
	vw := view.New(b.cfg.ViewDefinition(), b.metrics, b.log.With("component", "view"))
	// The set is made, and selects, before the sink is opened, since the
	// resources selected decide the sink's topics; the pipeline and the
	// checkpoint writer it hands deltas to and loads positions through
	// are made after the sink, before the set runs.
	var (
		pipe   *pipeline.Pipeline
		writer *checkpoint.Writer
	)
	sel := b.cfg.Selection()
	bus := b.bus()
	handler := source.HandlerFunc(func(d source.Delta) {
		b.metrics.Observed(&d)
		pipe.OnDelta(d)
	})
	src := source.NewSet(dyn, dc, source.SetOptions{
		Selection:       sel,
		ListConcurrency: b.cfg.ListConcurrency,
		Follow:          follow,
		Observer:        b.metrics,
		Prepare: func(ctx context.Context, res source.Resource) error {
			if p, ok := b.sink.(sink.Preparer); ok {
				return p.Prepare(ctx, res.GroupVersionResource)
			}
			return nil
		},
		Source: source.Options{
			Namespaces:        b.cfg.Namespaces,
			LabelSelector:     b.cfg.LabelSelector,
			FieldSelector:     b.cfg.FieldSelector,
			KeepManagedFields: b.cfg.KeepManagedFields,
			OldObject:         b.cfg.OldObject,
			Observer:          b.metrics,
			Discovery:         dc,
			StallTimeout:      b.cfg.WatchStallTimeout,
			// The raw path by default: objects go to the bus as the API
			// server sent them, never decoded. BRIDGE_OLD_OBJECT needs the
			// previous state decoded, and so the parsed path (the source
			// decides it from OldObject).
			REST: rc,
			View: vw,
			// In a state layout the bus is the record: compared with
			// the checkpoint at start, and with the cluster while the
			// bridge runs (see reconciler).
			Bus: bus,
		},
	}, loaderFunc(func(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
		// A resource's source may start again while the bridge runs
		// (watched at another version, or served again): it loads what
		// was published of it, acknowledged positions not yet flushed
		// included.
		if err := writer.Flush(ctx); err != nil {
			return checkpoint.Snapshot{}, err
		}
		return b.store.Load(ctx, resource)
	}), handler, b.log.With("component", "source"))
	if err := src.Select(ctx); err != nil {
		if errors.Is(err, source.ErrUnknownResource) {
			return fmt.Errorf("bridge: BRIDGE_RESOURCES: %w", err)
		}
		return fmt.Errorf("bridge: discovery: %w", err)
	}
	if unmatched := src.UnmatchedExclusions(); len(unmatched) > 0 {
		b.log.Warn("BRIDGE_EXCLUDE_RESOURCES: exclusions that match no resource the API server serves; misspelt?", "exclusions", unmatched)
	}
	resources := src.Resources()
	b.log.Info("selected resources", "selection", sel.String(), "resources", len(resources), "followsCluster", sel.Patterned())
	for _, r := range resources {
		b.log.Info("watching", "resource", r.Name(), "version", r.Version, "kind", r.Kind, "namespaced", r.Namespaced)
	}

	// Whatever way Run ends, the store and the sink are closed last,
	// within the exit's share of the budget.
	releaseStore := func() {}
	defer func() { b.release(ctx, budget, releaseStore) }()
	openStore := func() error {
		if b.store != nil {
			return nil
		}
		store, closeStore, err := b.openStore(ctx)
		if err != nil {
			return err
		}
		b.store, releaseStore = store, closeStore
		return nil
	}
	if b.sink == nil {
		// The Kafka sink is told of every topic it may write when the
		// checkpoint holds resources no longer watched, whose deletes
		// go to their topics (see retireGone): its store needs no
		// connection of the sink's, so it is opened first.
		followed := sel.Patterned()
		if b.cfg.Sink == config.SinkKafka && !followed && bus != nil {
			if err := openStore(); err != nil {
				return err
			}
			followed = b.unwatchedInCheckpoint(ctx, resources)
		}
		s, err := b.openSink(ctx, resources, followed)
		if err != nil {
			return err
		}
		b.sink = s
	}
	if err := openStore(); err != nil {
		return err
	}

	if err := b.checkLostCheckpoint(ctx, resources, bus); err != nil {
		return err
	}

	writer = checkpoint.NewWriter(b.store, b.cfg.CheckpointInterval, b.log.With("component", "checkpoint"))
	pipe = pipeline.New(b.sink, event.Encoder{Cluster: b.cfg.ClusterName, KeepManagedFields: b.cfg.KeepManagedFields}, writer, pipeline.Options{
		Workers:             b.cfg.Workers,
		BatchSize:           b.cfg.BatchSize,
		MaxPendingPerObject: b.cfg.MaxPendingPerObject,
		MaxRetryInterval:    b.cfg.RetryMaxInterval,
		Observer:            b.metrics,
		Intents:             writer,
	}, b.log.With("component", "pipeline"))
	b.metrics.Watch(metrics.Gauges{
		PendingDeltas:  func() float64 { return float64(pipe.Stats().Pending) },
		CheckpointLag:  func() float64 { return float64(writer.Stats().Pending) },
		LastCheckpoint: writer.LastFlush,
		SinkUp: func() float64 {
			if hc, ok := b.sink.(sink.HealthChecker); ok && hc.Health() != nil {
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
	b.metrics.Watches(src.Watches)
	b.src.Store(src)

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
	// pipeErr is nil, or says how many deltas the pipeline abandoned
	// (pipeline.ErrAbandoned): see pipeline.Pipeline.Run.
	var pipeErr error
	wg.Go(func() {
		defer utilruntime.HandleCrash()
		pipeErr = pipe.Run(pipeCtx)
	})
	srcCtx, stopSrc := context.WithCancelCause(ctx)
	defer stopSrc(nil)
	var writerErr error
	// writerBroke: the writer stopped on its own, before stopWriter, on a
	// damaged store (checkpoint.IsTerminal); no final flush is made.
	var writerBroke bool
	var writerWG sync.WaitGroup
	writerWG.Go(func() {
		defer utilruntime.HandleCrash()
		writerErr = writer.Run(writerCtx)
		if writerErr != nil && writerCtx.Err() == nil {
			// The store is damaged: nothing published from now on could
			// be checkpointed.
			writerBroke = true
			stopSrc(errCheckpointBroken)
		}
	})
	// Resources published before and no longer served: their objects are
	// deleted from the bus, before the bridge is ready.
	goneDone := make(chan struct{})
	goneCtx, stopGone := context.WithCancel(srcCtx)
	defer stopGone()
	go func() {
		defer utilruntime.HandleCrash()
		defer close(goneDone)
		if err := b.retireGone(goneCtx, dc, resources, bus, handler); err != nil && goneCtx.Err() == nil {
			b.log.Error("could not tell which resources published before are gone; their objects stay on the bus until the next start", "err", err)
		}
	}()
	go func() {
		defer utilruntime.HandleCrash()
		for _, done := range []<-chan struct{}{src.Synced(), goneDone} {
			select {
			case <-done:
			case <-srcCtx.Done():
				return
			}
		}
		if pipe.Drain(srcCtx) == nil {
			close(b.ready)
			b.log.Info("ready: initial state published")
			// The initial lists are the most the bridge ever holds at
			// once; what they left is garbage now. Returning it to the
			// system at once, rather than at the runtime's pace, makes
			// the resident set after the start what the steady state
			// needs.
			debug.FreeOSMemory()
		}
	}()

	// The reconciler compares the bus with the cluster while the source
	// runs, and stops with it.
	recCtx, stopRec := context.WithCancel(srcCtx)
	var recWG sync.WaitGroup
	if bus != nil {
		rec := &reconciler{set: src, settle: pipe.Drain, interval: b.cfg.ReconcileInterval, ready: b.ready,
			metrics: b.metrics, log: b.log.With("component", "reconcile")}
		recWG.Go(func() {
			defer utilruntime.HandleCrash()
			_ = rec.Run(recCtx)
		})
	}

	srcErr := src.Run(srcCtx)
	stopRec()
	recWG.Wait()
	stopGone()
	<-goneDone // hands nothing on after this
	// The stop began when ctx ended, or now, on a damaged store: every
	// stage's deadline counts from then (see package shutdown).
	budget.Begin()

	// Soft stop: publish what is queued, up to the drain's deadline or the
	// hard stop; unless the lease was lost, when another replica is about
	// to publish and this one must stop at once. On a damaged checkpoint
	// store the pipeline abandons the creations (they need an intent in
	// the checkpoint) and publishes the deletes and updates, which would
	// otherwise be lost.
	start := budget.Began()
	hard := false
	broken := errors.Is(context.Cause(srcCtx), errCheckpointBroken)
	switch {
	case errors.Is(context.Cause(ctx), leader.ErrLostLeadership):
		b.log.Warn("lost the lease: stopping without draining; the new leader publishes what is left", "pending", pipe.Stats().Pending)
	case b.hard.Err() != nil:
		hard = true
	default:
		drainCtx, cancel := budget.Context(ctx, shutdown.Drain)
		left := time.Until(budget.Deadline(shutdown.Drain)).Round(time.Millisecond).String()
		if broken {
			b.log.Error("the checkpoint store is damaged: stopping; publishing the deletes and updates already queued, whose positions cannot be recorded, and abandoning the creations",
				"objects", pipe.Stats().Pending, "timeout", left)
		} else {
			b.log.Info("draining: publishing what is queued before stopping", "objects", pipe.Stats().Pending, "timeout", left,
				"shutdownTimeout", budget.Total().String())
		}
		stopOnHard := context.AfterFunc(b.hard, cancel)
		drainErr := pipe.Drain(drainCtx)
		stopOnHard()
		cancel()
		switch {
		case drainErr == nil:
		case b.hard.Err() != nil:
			hard = true
		default:
			b.log.Warn("shutdown deadline reached; stopping with deltas unpublished", "err", drainErr)
		}
	}
	// Hard stop.
	stopPipe()
	wg.Wait()
	switch {
	case hard:
		b.log.Warn("hard stop: deltas abandoned; they were not checkpointed, so the next start publishes them",
			"abandoned", pipe.Stats().Abandoned)
	case errors.Is(pipeErr, pipeline.ErrAbandoned):
		// Expected after the shutdown deadline, a lost lease or a damaged
		// checkpoint store, each logged above: it does not fail Run.
		b.log.Warn("stopped with deltas unpublished", "abandoned", pipe.Stats().Abandoned, "err", pipeErr)
	}
	stopWriter()
	writerWG.Wait()
	// The final flush: everything acknowledged, within the flush's share
	// of the budget; never on a damaged store.
	var flushErr error
	if !writerBroke {
		flushCtx, cancel := budget.Context(ctx, shutdown.Flush)
		flushErr = writer.Flush(flushCtx)
		cancel()
		if flushErr != nil {
			b.log.Error("checkpoint: final flush failed", "err", flushErr, "pending", writer.Stats().Pending)
		}
	}

	st := pipe.Stats()
	ws := writer.Stats()
	b.log.Info("stopped", "took", time.Since(start).Round(time.Millisecond),
		"published", st.Published, "contentOmitted", st.Omitted, "skipped", st.Skipped, "retried", st.Retried,
		"coalesced", st.Coalesced, "abandoned", st.Abandoned, "relists", src.Relists(),
		"checkpointFlushes", ws.Flushes)
	return stopError(srcErr, pipeErr, writerErr, flushErr, broken, writerBroke)
}

// loaderFunc adapts a function to source.Loader.
type loaderFunc func(ctx context.Context, resource string) (checkpoint.Snapshot, error)

func (f loaderFunc) Load(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
	return f(ctx, resource)
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

// openSink opens the sink the configuration names.
func (b *Bridge) openSink(ctx context.Context, resources []source.Resource, followed bool) (sink.Sink, error) {
	log := b.log.With("component", "sink")
	switch b.cfg.Sink {
	case config.SinkNATS:
		return natssink.New(ctx, b.cfg.NATSSettings(), log)
	case config.SinkKafka:
		gvrs := make([]schema.GroupVersionResource, len(resources))
		for i, r := range resources {
			gvrs[i] = r.GroupVersionResource
		}
		opts := kafkasink.Options{ResourcesAdded: followed, TopicCompaction: b.metrics.KafkaTopicCompacted}
		return kafkasink.New(ctx, b.cfg.KafkaSettings(), gvrs, opts, log)
	default:
		return stdout.New(os.Stdout), nil
	}
}

// openStore opens the checkpoint store the configuration names. The
// function it returns releases what the store was opened on.
func (b *Bridge) openStore(ctx context.Context) (checkpoint.Store, func(), error) {
	log := b.log.With("component", "checkpoint")
	nothing := func() {}
	kind, arg := b.cfg.CheckpointKind()
	switch kind {
	case config.CheckpointFile:
		s, err := b.openFileStore(arg, log)
		if err != nil {
			return nil, nil, err
		}
		return s, nothing, nil
	case config.CheckpointNATSKV:
		// Share the sink's connection when the sink is NATS too.
		release := nothing
		var nc *nats.Conn
		if ns, ok := b.sink.(*natssink.Sink); ok {
			nc = ns.Conn()
		} else {
			c, err := natssink.Connect(ctx, b.cfg.NATSSettings(), log)
			if err != nil {
				return nil, nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
			}
			nc, release = c, c.Close
		}
		s, err := natskv.Open(ctx, nc, arg, natskv.Options{Create: b.cfg.NATS.CreateStream, Replicas: b.cfg.NATS.StreamReplicas,
			Dropped: b.metrics.CheckpointRecordDropped}, log)
		if err != nil {
			release()
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
		return s, nothing, nil
	case config.CheckpointNone:
		return checkpoint.Discard(), nothing, nil
	default:
		return nil, nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %q is not a checkpoint", b.cfg.Checkpoint)
	}
}
