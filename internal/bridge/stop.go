package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/leader"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/shutdown"
)

// stop stops the bridge once its source set has stopped, with srcErr, and
// what ended with the set has been waited for; broken is true when the
// set was stopped because the checkpoint store is damaged. It runs the
// stages of the one budget (see package shutdown) that the pipeline and
// the checkpoint writer take: the soft stop (drain) publishes what is
// queued, the hard stop halts the pipeline and abandons what is left, the
// writer is halted and the final flush records every position
// acknowledged. The last stage, release, closes the store and the sink:
// Run defers it, as it closes what was opened however Run ends. stop
// returns Run's error (see stopError).
func (b *Bridge) stop(ctx context.Context, budget *shutdown.Budget, p *built, pipe, writer *task, srcErr error, broken bool) error {
	// The stop began when ctx ended, or now, on a damaged store or a set
	// that failed: every stage's deadline counts from then.
	budget.Begin()
	hard := b.drain(ctx, budget, p.pipe, broken)
	pipeErr := pipe.halt()
	b.logAbandoned(hard, pipeErr, p.pipe)
	writerErr := writer.halt()
	// writerBroke: the writer stopped on its own, before it was halted,
	// on a damaged store (checkpoint.IsTerminal); no final flush is made
	// then.
	writerBroke := writerErr != nil && writer.early
	var flushErr error
	if !writerBroke {
		flushErr = b.flush(ctx, budget, p.writer)
	}
	b.logStopped(budget, p)
	return stopError(srcErr, pipeErr, writerErr, flushErr, broken, writerBroke)
}

// drain is the soft stop: it publishes what pipe holds, up to the drain's
// deadline or the hard stop (WithHardStop); unless the lease was lost,
// when another replica is about to publish and this one must stop at
// once. On a damaged checkpoint store (broken) the pipeline abandons the
// creations (they need an intent in the checkpoint) and publishes the
// deletes and updates, which would otherwise be lost. It returns true
// when the hard stop ended it, or had before it began.
func (b *Bridge) drain(ctx context.Context, budget *shutdown.Budget, pipe *pipeline.Pipeline, broken bool) (hard bool) {
	switch {
	case errors.Is(context.Cause(ctx), leader.ErrLostLeadership):
		b.log.Warn("lost the lease: stopping without draining; the new leader publishes what is left", "pending", pipe.Stats().Pending)
		return false
	case b.hard.Err() != nil:
		return true
	}
	drainCtx, cancel := budget.Context(ctx, shutdown.Drain)
	defer cancel()
	left := time.Until(budget.Deadline(shutdown.Drain)).Round(time.Millisecond).String()
	if broken {
		b.log.Error("the checkpoint store is damaged: stopping; publishing the deletes and updates already queued, whose positions cannot be recorded, and abandoning the creations",
			"objects", pipe.Stats().Pending, "timeout", left)
	} else {
		b.log.Info("draining: publishing what is queued before stopping", "objects", pipe.Stats().Pending, "timeout", left,
			"shutdownTimeout", budget.Total().String())
	}
	stopOnHard := context.AfterFunc(b.hard, cancel)
	err := pipe.Drain(drainCtx)
	stopOnHard()
	switch {
	case err == nil:
		return false
	case b.hard.Err() != nil:
		return true
	default:
		b.log.Warn("shutdown deadline reached; stopping with deltas unpublished", "err", err)
		return false
	}
}

// logAbandoned logs the deltas the pipeline abandoned when it stopped (the
// hard stage): after a hard stop (hard), or as pipeErr, the pipeline's
// error, says. They were never checkpointed, so the next start publishes
// them.
func (b *Bridge) logAbandoned(hard bool, pipeErr error, pipe *pipeline.Pipeline) {
	switch {
	case hard:
		b.log.Warn("hard stop: deltas abandoned; they were not checkpointed, so the next start publishes them",
			"abandoned", pipe.Stats().Abandoned)
	case errors.Is(pipeErr, pipeline.ErrAbandoned):
		// Expected after the shutdown deadline, a lost lease or a damaged
		// checkpoint store, each logged by drain: it does not fail Run.
		b.log.Warn("stopped with deltas unpublished", "abandoned", pipe.Stats().Abandoned, "err", pipeErr)
	}
}

// flush is the final checkpoint flush: every position acknowledged,
// within the flush's share of budget. It is never made on a damaged
// store.
func (b *Bridge) flush(ctx context.Context, budget *shutdown.Budget, writer *checkpoint.Writer) error {
	flushCtx, cancel := budget.Context(ctx, shutdown.Flush)
	defer cancel()
	err := writer.Flush(flushCtx)
	if err != nil {
		b.log.Error("checkpoint: final flush failed", "err", err, "pending", writer.Stats().Pending)
	}
	return err
}

// logStopped logs what the bridge did, and how long its stop took.
func (b *Bridge) logStopped(budget *shutdown.Budget, p *built) {
	st := p.pipe.Stats()
	ws := p.writer.Stats()
	b.log.Info("stopped", "took", time.Since(budget.Began()).Round(time.Millisecond),
		"published", st.Published, "contentOmitted", st.Omitted, "skipped", st.Skipped, "retried", st.Retried,
		"coalesced", st.Coalesced, "abandoned", st.Abandoned, "relists", p.set.Relists(),
		"checkpointFlushes", ws.Flushes)
}

// release closes e's checkpoint store, then what it was opened on
// (releaseStore), then its sink, within the exit's share of budget (see
// package shutdown); a part that was not opened is skipped. Their errors
// are logged, not returned: by then the final flush is over, and whatever
// the sink did not confirm was never checkpointed, so the next start
// publishes it again; a close that fails loses nothing.
func (b *Bridge) release(ctx context.Context, budget *shutdown.Budget, e ends) {
	exitCtx, cancel := budget.Context(ctx, shutdown.Exit)
	defer cancel()
	if e.store != nil {
		if err := within(exitCtx, e.store.Close); err != nil {
			b.log.Warn("checkpoint store did not close cleanly; what was flushed stays", "component", "checkpoint", "err", err)
		}
	}
	if e.releaseStore != nil {
		if err := within(exitCtx, func() error { e.releaseStore(); return nil }); err != nil {
			b.log.Warn("the checkpoint store's connection did not close in time", "component", "checkpoint", "err", err)
		}
	}
	if e.sink != nil {
		if err := e.sink.Close(exitCtx); err != nil {
			b.log.Warn("sink did not close cleanly; what it did not confirm was not checkpointed, and the next start publishes it again",
				"component", "sink", "err", err)
		}
	}
}

// within calls f and returns its error, or ctx's cause once ctx ends
// first: f then goes on, unwaited for, as for a close that blocks on a
// connection and cannot be cut short.
func within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("not done in time: %w", context.Cause(ctx))
	}
}

// stopError is Run's error after a stop, from what each part returned:
// the source's (srcErr), the pipeline's (pipeErr: having abandoned deltas
// is expected and logged, not an error), the checkpoint writer's
// (writerErr: only ever a damaged store's), and the final flush's
// (flushErr). broken is true when the damaged store stopped the source,
// writerBroke when it was found damaged at all. Every error that applies
// is in the result, the damaged store's first.
func stopError(srcErr, pipeErr, writerErr, flushErr error, broken, writerBroke bool) error {
	var errs []error
	switch {
	case broken:
		errs = append(errs, fmt.Errorf("bridge: %w", writerErr))
	case writerBroke:
		errs = append(errs, fmt.Errorf("bridge: the checkpoint store was found damaged while draining; no final flush was made: %w", writerErr))
	}
	if srcErr != nil {
		errs = append(errs, fmt.Errorf("bridge: %w", srcErr))
	}
	if pipeErr != nil && !errors.Is(pipeErr, pipeline.ErrAbandoned) {
		errs = append(errs, fmt.Errorf("bridge: %w", pipeErr))
	}
	if flushErr != nil {
		errs = append(errs, fmt.Errorf("bridge: final checkpoint flush: %w", flushErr))
	}
	return errors.Join(errs...)
}
