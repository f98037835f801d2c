package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/kubebus/bridge/source"
)

// The queue: OnDelta appends a delta to its object's waiting deltas
// (collapsing them past MaxPendingPerObject, see coalesce) and queues the
// object; an object is handed to one assembler at a time, so its deltas
// are never in two batches at once. finish releases a batch's objects and
// wakes the Drain calls waiting on them.
//
// The work queue holds the objects themselves, so that neither assembly
// nor finish looks a key up again. A key has at most one object at a
// time, and a new one only once the old one has nothing left in flight,
// so the order of a key's deltas holds across objects too. An object
// removed from p.objects may still come off the queue once (it was queued
// again while its last batch was in flight): it is gone, and has nothing
// to take. Removed objects are not reused: the work queue may still hold
// a removed object, and a pool would keep the objects of a first sync
// alive for two more collections.
//
// Every delta is numbered in the order OnDelta queued it (Pipeline.seq).
// An object is in p.objects exactly as long as some of its deltas are not
// done (published, skipped or abandoned): it is added with its first
// delta and removed when the batch that took its last one finishes.

// object is the state of one object with deltas waiting or in flight.
type object struct {
	// key is the object's resource name, "/" and its key (appendKey); res
	// is the length of the resource name in it.
	key string
	res int
	// gone is set once the object is removed from p.objects.
	gone bool

	pending []source.Delta
	// charged is what the waiting deltas are charged against the budget;
	// flyingCharged what those of the batch in flight are.
	charged, flyingCharged int64
	// last is the sequence number of the newest delta enqueued; taken is
	// the newest in the batch in flight; done is the newest finished
	// (published, skipped or abandoned).
	last, taken, done uint64
	// first is the number of the oldest waiting delta, while some wait;
	// flying that of the oldest in the batch in flight, while one is. A
	// delta collapsed into a later one keeps its number here: it is done
	// when the delta that carries its state is.
	first, flying uint64
	// firstDelta is where the object's first delta waits, so that an
	// object and its first delta take one allocation: most objects have
	// only one delta waiting at a time.
	firstDelta [1]source.Delta
}

// oldest is the number of the object's oldest delta not done, or
// noDelta when all are done.
func (o *object) oldest() uint64 {
	switch {
	case o.taken > o.done:
		return o.flying
	case len(o.pending) > 0:
		return o.first
	}
	return noDelta
}

// noDelta is after every delta's number.
const noDelta = ^uint64(0)

// barrier is one Drain call waiting: it waits for every delta numbered up
// to seq. left counts the objects that still have such a delta not done.
// An object's deltas are done in order, one batch at a time, so an object
// leaves the count once, when a batch that took its last delta numbered
// up to seq finishes.
type barrier struct {
	seq  uint64
	left int
	ch   chan struct{}
}

// OnDelta queues d behind the other waiting deltas of its object. It never
// blocks on I/O; it waits while the deltas not done weigh
// Options.MaxPendingBytes (see budget), until the sink has accepted enough
// of them, StopHolding is called, or Run stops.
func (p *Pipeline) OnDelta(d source.Delta) {
	charge, ok := p.budget.take(weight(&d))
	if !ok {
		// Run has stopped: nothing will publish this delta. It was never
		// checkpointed, so the next start finds it again.
		p.abandoned.Add(1)
		return
	}
	var buf [128]byte
	key, res := appendKey(buf[:0], &d)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.budget.give(charge)
		p.abandoned.Add(1)
		return
	}
	o := p.objects[string(key)]
	if o == nil {
		o = &object{key: string(key), res: res}
		o.pending = o.firstDelta[:0]
		p.objects[o.key] = o
	}
	p.seq++
	if len(o.pending) == 0 {
		o.first = p.seq
	}
	o.last = p.seq
	o.pending = append(o.pending, d)
	o.charged += charge
	if len(o.pending) == 2 && o.taken == 0 {
		// The first delta moved out of firstDelta before it was taken:
		// let what its copy there points to be collected.
		clear(o.firstDelta[:])
	}
	var freed int64
	if len(o.pending) > p.opts.MaxPendingPerObject {
		before := len(o.pending)
		o.pending = coalesce(o.pending)
		if n := before - len(o.pending); n > 0 {
			// Only a collapse changes the charge: deltas that cannot merge
			// (an object deleted and made again) are not weighed again
			// at every delta.
			p.coalesced.Add(int64(n))
			freed = p.recharge(o)
		}
	}
	// Queued under p.mu, which Run holds as it shuts the queue down: o is
	// on the queue before it closes, where Run finds it, or not in
	// p.objects at all.
	p.queue.Add(o)
	p.budget.give(freed)
	p.mu.Unlock()
}

// recharge charges o's waiting deltas anew, after some were collapsed,
// and returns what they are charged less than before; o's charge never
// grows, so what is given back never exceeds what was taken (deltas
// taken uncharged once the budget opened are charged nothing more).
// Called with p.mu held.
func (p *Pipeline) recharge(o *object) int64 {
	var now int64
	for i := range o.pending {
		now += p.budget.charge(weight(&o.pending[i]))
	}
	if now >= o.charged {
		return 0
	}
	freed := o.charged - now
	o.charged = now
	return freed
}

// appendKey appends to b the key of d's object in p.objects: its
// resource's name (source.Resource.Name), "/" and d.Key(). It returns it
// with the length of the resource's name. Looking an object up with it
// makes no garbage; only a new object's key is copied into a string.
func appendKey(b []byte, d *source.Delta) ([]byte, int) {
	gr := d.Resource.GroupResource()
	b = append(b, gr.Resource...)
	if gr.Group != "" {
		b = append(b, '.')
		b = append(b, gr.Group...)
	}
	res := len(b)
	b = append(b, '/')
	if d.Namespace != "" {
		b = append(b, d.Namespace...)
		b = append(b, '/')
	}
	return append(b, d.Name...), res
}

// Drain waits until every delta queued before the call is published,
// skipped or abandoned, or until ctx ends; not for what is queued after
// it. A delta collapsed into a later one (see coalesce) is done when that
// one is, even one queued after the call.
func (p *Pipeline) Drain(ctx context.Context) error {
	p.mu.Lock()
	if len(p.objects) == 0 {
		p.mu.Unlock()
		return nil
	}
	// Every object in p.objects has a delta not done, numbered up to seq.
	b := &barrier{seq: p.seq, left: len(p.objects), ch: make(chan struct{})}
	p.barriers = append(p.barriers, b)
	p.mu.Unlock()

	select {
	case <-b.ch:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.barriers = slices.DeleteFunc(p.barriers, func(x *barrier) bool { return x == b })
		left := b.left
		p.mu.Unlock()
		return fmt.Errorf("pipeline: %d objects still have deltas in flight: %w", left, ctx.Err())
	}
}

// finish marks the batch of objs done and releases them to other
// workers.
func (p *Pipeline) finish(objs []*object) {
	var freed int64
	p.mu.Lock()
	for _, o := range objs {
		if o.gone {
			continue
		}
		freed += o.flyingCharged
		o.flyingCharged = 0
		before := o.oldest()
		o.done = o.taken
		if after := o.oldest(); after != before {
			p.passed(before, after)
		}
		if o.taken > 0 {
			// The batch that took the first delta from where it waited
			// (firstDelta) is over, and later deltas wait elsewhere:
			// nothing is held there for them.
			clear(o.firstDelta[:])
		}
		if len(o.pending) == 0 && o.done == o.last {
			delete(p.objects, o.key)
			o.gone = true
		}
	}
	// Given back under p.mu, so that a Drain that returns finds the room
	// of what it waited for given back too. (No one waiting for room holds
	// p.mu.)
	p.budget.give(freed)
	p.mu.Unlock()
	for _, o := range objs {
		p.queue.Done(o)
	}
}

// passed counts, for the Drain calls waiting, that an object's oldest
// delta not done went from the one numbered before to the one numbered
// after (noDelta: none is left). A barrier that waited for the object's
// deltas up to its seq no longer does when seq lies between the two, and
// is released when it was the last object it waited for. Called with
// p.mu held.
func (p *Pipeline) passed(before, after uint64) {
	if len(p.barriers) == 0 {
		return
	}
	p.barriers = slices.DeleteFunc(p.barriers, func(b *barrier) bool {
		if before <= b.seq && b.seq < after {
			if b.left--; b.left == 0 {
				close(b.ch)
				return true
			}
		}
		return false
	})
}

// resource is the name of the object's resource (source.Resource.Name).
func (o *object) resource() string { return o.key[:o.res] }

// objectKey is the object's key (source.Delta.Key).
func (o *object) objectKey() string { return o.key[o.res+1:] }
