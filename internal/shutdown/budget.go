// Package shutdown divides one budget, the time from the stop signal to
// the process's exit (BRIDGE_SHUTDOWN_TIMEOUT), among the stages of a
// graceful stop.
//
// The stages run in this order, which is also their order of priority:
//
//  1. Drain: what is queued is published. It ends at the latest when
//     DrainShare of the budget has passed, leaving the rest to the stages
//     after it, whatever it still holds.
//  2. Flush: the final checkpoint flush. It may use every moment the drain
//     left, up to FlushShare of the budget; it is never cut short to let a
//     later stage run.
//  3. Exit: the sink's and the checkpoint store's close, the lease's
//     release and the HTTP server's shutdown. They get what is left, up
//     to ExitShare of the budget; a close that has not finished by then
//     is abandoned (the next start publishes again what it did not
//     confirm). The rest of the budget is the process's, to end.
//
// A stage that ends early leaves its time to the next. Every deadline is
// counted from the moment the stop began, so the time the watches take to
// stop is counted too, and the process is gone by the budget's end, with
// the checkpoint flushed, as long as the store answers within the flush's
// share.
package shutdown

import (
	"context"
	"sync"
	"time"
)

// The budget's shares, as fractions of the whole, at which each stage
// ends at the latest.
const (
	// DrainShare: the drain gets most of the budget, as it is the stage
	// that waits on the bus; what it cannot publish in time is abandoned,
	// never lost (it was not checkpointed).
	DrainShare = 0.75
	// FlushShare: the flush and the stages after it get the rest. A flush
	// commits one batch of positions (a file's fsync, one write to the
	// bus), which takes milliseconds when the store answers; 15% of the
	// default 25 s is 3.75 s.
	FlushShare = 0.90
	// ExitShare: closing connections and releasing the lease are single
	// round trips; 5% is 1.25 s by default. The last 5% (1.25 s) is left
	// for the process to end once they are done, and to absorb a store
	// that overran the flush's share.
	ExitShare = 0.95
)

// Stage is one stage of a graceful stop.
type Stage int

// The stages, in order.
const (
	Drain Stage = iota
	Flush
	Exit
)

func (s Stage) String() string {
	switch s {
	case Drain:
		return "drain"
	case Flush:
		return "flush"
	case Exit:
		return "exit"
	}
	return "unknown"
}

// share is the fraction of the budget at whose end stage s ends.
func (s Stage) share() float64 {
	switch s {
	case Drain:
		return DrainShare
	case Flush:
		return FlushShare
	}
	return ExitShare
}

// Budget is the time one stop may take, from the moment it began. It is
// safe for concurrent use.
type Budget struct {
	total time.Duration
	once  sync.Once
	began time.Time
}

// Watch returns a Budget of total that begins when ctx ends (or when
// Begin is called first, for a stop that does not come from ctx).
func Watch(ctx context.Context, total time.Duration) *Budget {
	b := &Budget{total: total}
	context.AfterFunc(ctx, b.Begin)
	return b
}

// Begin marks the stop as begun now, unless it already has.
func (b *Budget) Begin() { b.once.Do(func() { b.began = time.Now() }) }

// Total is the whole budget.
func (b *Budget) Total() time.Duration { return b.total }

// Began is when the stop began; it begins now if it had not.
func (b *Budget) Began() time.Time {
	b.Begin()
	return b.began
}

// Deadline is when stage s must end. The stop begins now if it had not.
func (b *Budget) Deadline(s Stage) time.Time {
	return b.Began().Add(time.Duration(float64(b.total) * s.share()))
}

// Wait calls wait and returns when it does, or at stage s's deadline,
// whichever comes first; wait then goes on, unwaited for. The stop begins
// now if it had not.
func (b *Budget) Wait(s Stage, wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	t := time.NewTimer(time.Until(b.Deadline(s)))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// Context returns a context that ends at stage s's deadline. It carries
// parent's values, but not its end: the stages of a stop run after the
// context that started the stop has ended.
func (b *Budget) Context(parent context.Context, s Stage) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.WithoutCancel(parent), b.Deadline(s))
}
