package pipeline

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/kubebus/bridge/source"
)

// The budget: every delta not done (waiting or in flight) is charged its
// weight against Options.MaxPendingBytes. OnDelta takes the charge before
// it queues the delta, waiting for room when there is none, so that a
// source faster than the sink is held back instead of filling memory; the
// charge is given back when the batch that took the delta finishes, or
// when the delta is collapsed into a later one. Once the source stops
// (StopHolding), nothing waits any more: what it hands on after that is
// the little it had read, and a sink that takes nothing must not keep it
// from stopping.

// What a delta weighs besides its object's JSON.
const (
	// deltaOverhead approximates what the pipeline keeps per delta: the
	// Delta, its place among its object's deltas, and the object's entry.
	deltaOverhead = 256
	// parsedWeight is what an object of the parsed path (Delta.Object,
	// Delta.OldObject: decoded maps, whose size is not known without
	// walking them) is charged.
	parsedWeight = 4 << 10
)

// weight is what d is charged against the budget: its object's JSON as
// the API server sent it, its view's state, and deltaOverhead.
func weight(d *source.Delta) int64 {
	w := int64(deltaOverhead + len(d.View))
	if d.Raw != nil {
		w += int64(len(d.Raw.Data()))
	}
	if d.Object != nil {
		w += parsedWeight
	}
	if d.OldObject != nil {
		w += parsedWeight
	}
	return w
}

// budget is the room for deltas not done. A delta heavier than the whole
// budget is charged the whole budget: it waits until nothing else is
// pending, then goes alone.
type budget struct {
	room  *semaphore.Weighted
	limit int64
	// state is holding until the source stops (open: deltas go through
	// uncharged) or Run does (stopped: they are abandoned); wake ends
	// every wait when it changes.
	state atomic.Int32
	wake  context.Context
	woken context.CancelFunc

	held    atomic.Int64 // bytes charged now
	waits   atomic.Int64 // OnDelta calls that found no room
	waiting atomic.Int64 // nanoseconds OnDelta spent waiting for room, once it had it
	blocked atomic.Int64 // OnDelta calls waiting for room now
}

// The states of a budget.
const (
	holding int32 = iota
	open
	stopped
)

func newBudget(limit int64) *budget {
	ctx, cancel := context.WithCancel(context.Background())
	return &budget{room: semaphore.NewWeighted(limit), limit: limit, wake: ctx, woken: cancel}
}

// charge is what a delta of weight w is charged: w, at most the whole
// budget.
func (b *budget) charge(w int64) int64 { return min(w, b.limit) }

// take charges a delta of weight w, waiting for room as long as there is
// none, and returns what it charged. Once the budget is open it charges
// nothing; once stopped it returns false, having charged nothing.
func (b *budget) take(w int64) (int64, bool) {
	if st := b.state.Load(); st != holding {
		return 0, st == open
	}
	n := b.charge(w)
	if !b.room.TryAcquire(n) {
		b.waits.Add(1)
		b.blocked.Add(1)
		began := time.Now()
		err := b.room.Acquire(b.wake, n)
		b.waiting.Add(int64(time.Since(began)))
		b.blocked.Add(-1)
		if err != nil {
			return 0, b.state.Load() == open
		}
	}
	b.held.Add(n)
	return n, true
}

// give gives back n: a sum of what take charged.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.held.Add(-n)
	b.room.Release(n)
}

// end moves the budget to state, open or stopped, unless it left holding
// already, and ends every wait.
func (b *budget) end(state int32) {
	b.state.CompareAndSwap(holding, state)
	b.woken()
}
