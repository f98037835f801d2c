package pipeline

import (
	"context"
	"fmt"

	"github.com/kubebus/bridge/source"
)

// The queue: OnDelta appends a delta to its object's waiting deltas
// (collapsing them past MaxPendingPerObject, see coalesce) and queues the
// object's key; a key is handed to one assembler at a time, so one
// object's deltas are never in two batches at once. finish releases a
// batch's keys and wakes the Drain calls waiting on them.

// object is the state of one object with deltas waiting or in flight.
type object struct {
	pending []source.Delta
	// last is the sequence number of the newest delta enqueued; taken is
	// the newest in the batch in flight; done is the newest finished
	// (published, skipped or abandoned).
	last, taken, done uint64
}

// barrier waits until, for each key, the delta numbered target[key] or a
// later one is done.
type barrier struct {
	target map[string]uint64
	ch     chan struct{}
}

// OnDelta queues d behind the other waiting deltas of its object. It never
// blocks on I/O.
func (p *Pipeline) OnDelta(d source.Delta) {
	if p.queue.ShuttingDown() {
		// Run has stopped: nothing will publish this delta. It was never
		// checkpointed, so the next start finds it again.
		p.abandoned.Add(1)
		return
	}
	key := d.Resource.Name() + "/" + d.Key()
	p.mu.Lock()
	o := p.objects[key]
	if o == nil {
		o = &object{}
		p.objects[key] = o
	}
	p.seq++
	o.last = p.seq
	o.pending = append(o.pending, d)
	if len(o.pending) > p.opts.MaxPendingPerObject {
		before := len(o.pending)
		o.pending = coalesce(o.pending)
		p.coalesced.Add(int64(before - len(o.pending)))
	}
	p.mu.Unlock()
	p.queue.Add(key)
}

// Drain waits until every delta queued before the call is published,
// skipped or abandoned, or until ctx ends.
func (p *Pipeline) Drain(ctx context.Context) error {
	p.mu.Lock()
	b := &barrier{target: map[string]uint64{}, ch: make(chan struct{})}
	for key, o := range p.objects {
		if o.done < o.last {
			b.target[key] = o.last
		}
	}
	if len(b.target) == 0 {
		p.mu.Unlock()
		return nil
	}
	p.barriers[b] = struct{}{}
	p.mu.Unlock()

	select {
	case <-b.ch:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.barriers, b)
		left := len(b.target)
		p.mu.Unlock()
		return fmt.Errorf("pipeline: %d objects still have deltas in flight: %w", left, ctx.Err())
	}
}

// finish marks the batch of keys done and releases them to other workers.
func (p *Pipeline) finish(keys []string) {
	p.mu.Lock()
	for _, key := range keys {
		o := p.objects[key]
		if o == nil {
			continue
		}
		o.done = o.taken
		for b := range p.barriers {
			if t, ok := b.target[key]; ok && t <= o.done {
				delete(b.target, key)
				if len(b.target) == 0 {
					close(b.ch)
					delete(p.barriers, b)
				}
			}
		}
		if len(o.pending) == 0 && o.done == o.last {
			delete(p.objects, key)
		}
	}
	p.mu.Unlock()
	for _, key := range keys {
		p.queue.Done(key)
	}
}
