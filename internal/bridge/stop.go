package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/shutdown"
)

// release closes the checkpoint store, then what it was opened on
// (releaseStore), then the sink, within the exit's share of budget (see
// package shutdown). Their errors are logged, not returned: by then the
// final flush is over, and whatever the sink did not confirm was never
// checkpointed, so the next start publishes it again; a close that fails
// loses nothing.
func (b *Bridge) release(ctx context.Context, budget *shutdown.Budget, releaseStore func()) {
	exitCtx, cancel := budget.Context(ctx, shutdown.Exit)
	defer cancel()
	if b.store != nil {
		if err := within(exitCtx, b.store.Close); err != nil {
			b.log.Warn("checkpoint store did not close cleanly; what was flushed stays", "component", "checkpoint", "err", err)
		}
	}
	if err := within(exitCtx, func() error { releaseStore(); return nil }); err != nil {
		b.log.Warn("the checkpoint store's connection did not close in time", "component", "checkpoint", "err", err)
	}
	if b.sink != nil {
		if err := b.sink.Close(exitCtx); err != nil {
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
