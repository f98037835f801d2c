package pipeline

import (
	"context"
	"sync"
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
	// valueOverhead approximates what a decoded value takes besides its
	// strings: its interface, its map entry or slice element.
	valueOverhead = 32
)

// weight is what d is charged against the budget: its object's JSON as
// the API server sent it, or, on the parsed path (Object, OldObject), an
// estimate of the decoded objects' size (decodedSize); its view's state;
// and deltaOverhead.
func weight(d *source.Delta) int64 {
	w := int64(deltaOverhead + len(d.View))
	if d.Raw != nil {
		w += int64(len(d.Raw.Data()))
	}
	if d.Object != nil {
		w += decodedSize(d.Object.Object)
	}
	if d.OldObject != nil {
		w += decodedSize(d.OldObject.Object)
	}
	return w
}

// decodedSize estimates what v, a value decoded from JSON, takes: its
// strings' bytes and valueOverhead per value and map key.
func decodedSize(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(valueOverhead)
		for k, x := range v {
			n += int64(len(k)) + decodedSize(x)
		}
		return n
	case []any:
		n := int64(valueOverhead)
		for _, x := range v {
			n += decodedSize(x)
		}
		return n
	case string:
		return valueOverhead + int64(len(v))
	default:
		return valueOverhead
	}
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

	held atomic.Int64 // bytes charged now

	// The waits for room, counted under mu (only a call that finds no
	// room takes it): how many began, how many go on now, the time of
	// those over, and when each of those going on began, summed.
	mu       sync.Mutex
	waits    int64
	blocked  int64
	waited   time.Duration
	sinceSum int64     // Σ of the begin (see now) of each wait going on
	made     time.Time // the origin of now
}

// The states of a budget.
const (
	holding int32 = iota
	open
	stopped
)

func newBudget(limit int64) *budget {
	ctx, cancel := context.WithCancel(context.Background())
	return &budget{room: semaphore.NewWeighted(limit), limit: limit, wake: ctx, woken: cancel, made: time.Now()}
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
		end := b.waiting()
		err := b.room.Acquire(b.wake, n)
		end()
		if err != nil {
			return 0, b.state.Load() == open
		}
	}
	b.held.Add(n)
	return n, true
}

// waiting counts a wait for room beginning now; the function it returns
// counts its end. The clock is read under b.mu, here and in waitStats, so
// that the time waited, as waitStats reports it, never goes back.
func (b *budget) waiting() (end func()) {
	b.mu.Lock()
	began := b.now()
	b.waits++
	b.blocked++
	b.sinceSum += began
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.blocked--
		b.sinceSum -= began
		b.waited += time.Duration(b.now() - began)
		b.mu.Unlock()
	}
}

// waitStats reports how many waits for room began, how many go on now, and
// how long they took in all, those going on counted up to now.
func (b *budget) waitStats() (waits, blocked int64, took time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waits, b.blocked, b.waited + time.Duration(b.blocked*b.now()-b.sinceSum)
}

// now is the time on the monotonic clock, in nanoseconds since the budget
// was made. Called with b.mu held.
func (b *budget) now() int64 { return int64(time.Since(b.made)) }

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
