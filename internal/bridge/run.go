package bridge

import (
	"context"
	"errors"
	"runtime/debug"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/discoverydoc"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/shutdown"
	"github.com/kubebus/bridge/source"
)

// built is what Run built, for run.
type built struct {
	clients   clients
	set       *source.Set
	resources []source.Resource
	// bus is the bus the set compares with the cluster; nil unless the
	// sink writes a state layout.
	bus    source.Bus
	ends   ends
	writer *checkpoint.Writer
	pipe   *pipeline.Pipeline
	// down is what the set hands its deltas to.
	down *relay
	// discovery publishes the cluster's discovery document; nil when the
	// sink keeps none.
	discovery *discoverydoc.Publisher
}

// run runs the bridge's goroutines until ctx ends, or the checkpoint
// store is found damaged, or the source set fails; then it stops them
// (see stop) and returns Run's error.
//
// The source set runs on the calling goroutine. The retiring of resources
// no longer watched, the wait for readiness and the reconciler end with
// it, and are waited for before the stop begins: nothing is handed to the
// pipeline after that. The pipeline and the checkpoint writer outlive the
// set: their contexts do not end with ctx, and stop halts them, in order.
func (b *Bridge) run(ctx context.Context, budget *shutdown.Budget, p *built) error {
	detached := context.WithoutCancel(ctx)
	pipe := start(detached, p.pipe.Run)
	srcCtx, stopSrc := context.WithCancelCause(ctx)
	defer stopSrc(nil)
	writer := start(detached, func(ctx context.Context) error {
		err := p.writer.Run(ctx)
		if err != nil {
			// The store is damaged: nothing published from now on could
			// be checkpointed. (Once the set has stopped, which is before
			// the writer is halted, stopping it again changes nothing.)
			stopSrc(errCheckpointBroken)
		}
		return err
	})

	// Resources published before and no longer served: their objects are
	// deleted from the bus, before the bridge is ready. Once their deletes
	// are published, retired tells the discovery document what it must
	// name still.
	var retired retirement
	gone := start(srcCtx, func(ctx context.Context) error {
		r, err := b.retireGone(ctx, p.clients.disc, p.ends, p.resources, p.bus, p.down)
		if err != nil && ctx.Err() == nil {
			b.log.Error("could not tell which resources published before are gone; their objects stay on the bus until the next start", "err", err)
		}
		if r.deleted > 0 && p.pipe.Drain(ctx) != nil {
			// Stopping, the deletes not all done: the document must name
			// every resource the old one did.
			r.unread = true
		}
		retired = r
		return nil
	})
	withSet := []*task{gone, start(srcCtx, func(ctx context.Context) error {
		b.awaitReady(ctx, p.set, gone.done, p.pipe)
		return nil
	})}
	if p.discovery != nil {
		// The discovery document, on a goroutine of its own: it never
		// holds up the objects. In a state layout the document on the
		// bus is the record of the resources published before, which
		// retireGone reads: it is replaced only once the deletes of those
		// no longer watched are done, by one that names those whose
		// objects may be left. When it could not be read, it is read again
		// first, and every resource it named is kept (rereadDiscovery).
		withSet = append(withSet, start(srcCtx, func(ctx context.Context) error {
			if p.bus != nil {
				select {
				case <-gone.done:
				case <-ctx.Done():
					return nil
				}
				kept := retired.kept
				if retired.unread {
					var ok bool
					if kept, ok = b.rereadDiscovery(ctx, p.ends.sink, p.set.Resources()); !ok {
						return nil // stopping
					}
				}
				b.keptDiscovery = kept
			}
			return p.discovery.Run(ctx)
		}))
	}
	if p.bus != nil {
		// The reconciler compares the bus with the cluster while the set
		// runs.
		rec := &reconciler{set: p.set, settle: p.pipe.Drain, interval: b.cfg.ReconcileInterval, ready: b.ready,
			metrics: b.metrics, log: b.log.With("component", "reconcile")}
		withSet = append(withSet, start(srcCtx, rec.Run))
	}

	srcErr := p.set.Run(srcCtx)
	for _, t := range withSet {
		t.halt() // hands nothing on after this
	}
	return b.stop(ctx, budget, p, pipe, writer, srcErr, errors.Is(context.Cause(srcCtx), errCheckpointBroken))
}

// awaitReady closes b.ready once set has synced, gone is closed (the
// retiring of resources no longer watched has handed its deletes on), and
// what they handed on is published, unless ctx ends first.
func (b *Bridge) awaitReady(ctx context.Context, set *source.Set, gone <-chan struct{}, pipe *pipeline.Pipeline) {
	for _, done := range []<-chan struct{}{set.Synced(), gone} {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
	if pipe.Drain(ctx) != nil {
		return
	}
	close(b.ready)
	b.log.Info("ready: initial state published")
	// The initial lists are the most the bridge ever holds at once; what
	// they left is garbage now. Returning it to the system at once,
	// rather than at the runtime's pace, makes the resident set after the
	// start what the steady state needs.
	debug.FreeOSMemory()
}

// task is one goroutine of a running bridge, on a context of its own.
// Each task is stopped on its own, as the stop has an order.
type task struct {
	stop context.CancelFunc
	// done is closed once the task's function has returned, with err.
	done chan struct{}
	err  error
	// early is true when the function returned before the task was
	// stopped (or its parent context ended).
	early bool
}

// start runs f on a goroutine of its own, on a child of ctx.
func start(ctx context.Context, f func(context.Context) error) *task {
	ctx, stop := context.WithCancel(ctx)
	t := &task{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer utilruntime.HandleCrash()
		t.err = f(ctx)
		t.early = ctx.Err() == nil
	}()
	return t
}

// halt ends the task's context, waits for its function to return, and
// returns its error.
func (t *task) halt() error {
	t.stop()
	<-t.done
	return t.err
}
