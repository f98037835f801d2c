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
	"sync/atomic"

	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/shutdown"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// errCheckpointBroken is the cause the source is stopped with when the
// checkpoint writer stopped on a damaged store.
var errCheckpointBroken = errors.New("bridge: the checkpoint store is damaged")

// Bridge is one configured bridge.
type Bridge struct {
	cfg     *config.Config
	rest    *rest.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	hard    context.Context
	budget  *shutdown.Budget
	ready   chan struct{}
	// keptDiscovery are the resources, not watched, that the discovery
	// document names still (see retirement); set before the publisher
	// runs, and read by it.
	keptDiscovery []wire.DiscoveredResource
	// withSink and withStore are the sink and the store given with
	// WithSink and WithStore; nil: Run opens those the configuration
	// names.
	withSink  sink.Sink
	withStore checkpoint.Store
	// running is what Readiness asks about; nil before Run has built it.
	running atomic.Pointer[live]
}

// live is the part of a running bridge that Readiness asks about.
type live struct {
	set  *source.Set
	sink sink.Sink
}

// Option changes how New builds a Bridge.
type Option func(*Bridge)

// WithSink publishes to s instead of the sink the configuration names.
// A nats-kv checkpoint then opens a NATS connection of its own.
func WithSink(s sink.Sink) Option { return func(b *Bridge) { b.withSink = s } }

// WithStore keeps the checkpoint in s instead of the store the
// configuration names.
func WithStore(s checkpoint.Store) Option { return func(b *Bridge) { b.withStore = s } }

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
	l := b.running.Load()
	if l == nil {
		return nil
	}
	if err := l.set.Healthy(); err != nil {
		return err
	}
	if hc, ok := l.sink.(sink.HealthChecker); ok {
		if err := hc.Health(); err != nil {
			return err
		}
	}
	return nil
}

// Run runs the bridge until ctx ends. Errors that come from the
// configuration wrap source.ErrUnknownResource or source.ErrBadSelector.
//
// Run builds the bridge's parts in the order they depend on each other,
// each by a function that returns what it built; run then runs them and
// stops them, and release closes the sink and the store.
func (b *Bridge) Run(ctx context.Context) error {
	budget := b.budget
	if budget == nil {
		budget = shutdown.Watch(ctx, b.cfg.ShutdownTimeout)
	}
	cl, err := newClients(b.rest)
	if err != nil {
		return err
	}
	vw := b.newView()
	// The set is made, and selects, before the sink is opened, since the
	// resources selected decide the sink's topics; what it hands deltas
	// to is made from the sink, and reached through down (see relay).
	down := &relay{metrics: b.metrics, cluster: b.cfg.ClusterName}
	state := b.holdsState()
	var bus source.Bus
	if state {
		bus = down
	}
	// The set tells of each change of the resources it watches on
	// changed, for the discovery document.
	changed := make(chan struct{}, 1)
	set, err := b.newSet(ctx, cl, vw, down, bus, changed)
	if err != nil {
		return err
	}
	resources := set.Resources()

	e, err := b.openEnds(ctx, resources, b.cfg.Selection().Patterned(), state)
	// Whatever way Run ends from here, the store and the sink are closed
	// last, within the exit's share of the budget.
	defer b.release(ctx, budget, e)
	if err != nil {
		return err
	}
	if err := b.checkLostCheckpoint(ctx, e, resources, bus); err != nil {
		return err
	}
	writer, pipe := b.newPipeline(e)
	down.attach(e, writer, pipe)
	b.watch(set, resources, vw, e.sink, writer, pipe)
	b.running.Store(&live{set: set, sink: e.sink})
	if err := b.check(ctx, set); err != nil {
		return err
	}
	disc, err := b.newDiscoveryPublisher(e.sink, set, cl, changed)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	return b.run(ctx, budget, &built{clients: cl, set: set, resources: resources, bus: bus, ends: e, writer: writer, pipe: pipe, down: down,
		discovery: disc})
}
