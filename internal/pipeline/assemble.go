package pipeline

import (
	"context"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// Assembly: an assembler takes keys off the queue until their waiting
// deltas fill a batch, moves those deltas out of their objects, and
// encodes them while the workers wait for the bus.

// item is one delta in a batch, with its message.
type item struct {
	obj   *object
	delta *source.Delta
	msg   *wire.Message
	// lease holds msg's bytes when the encoder lent them (LeaseEncoder):
	// release gives them back.
	lease *event.Lease
	// tooLarge is why the delta's full event was not published, when msg
	// is the event without the object's content sent in its place.
	tooLarge error
}

// batch is what an assembler hands to a worker: the objects it took off
// the queue and their deltas, encoded. Once the worker is done with it,
// the room of its slices goes to a later batch (see recycle).
type batch struct {
	objs  []*object
	items []item
	// taken is how many items take made, before encode left out those
	// it skipped.
	taken int
}

// assemble takes batches off the queue, encodes them and hands them to
// the workers on ready, until the queue shuts down. After ctx ends it
// encodes nothing more: what it takes is abandoned.
func (p *Pipeline) assemble(ctx context.Context, ready chan<- *batch) {
	for {
		b := p.nextBatch()
		if b == nil {
			return
		}
		if ctx.Err() != nil {
			// Hard stop: the queue hands out what is left; do not publish
			// it with a dead context, just count it.
			p.abandoned.Add(int64(len(b.items)))
			p.finish(b.objs)
			p.recycle(b)
			continue
		}
		b.items = p.encode(b.items)
		ready <- b
	}
}

// nextBatch takes objects off the queue until their waiting deltas fill a
// batch or the queue is empty, moving each object's deltas into the batch
// as it takes the object. Only the worker holding getMu calls Get, so
// after the first object a non-empty queue means Get does not block: a
// worker never sits on objects it has taken while waiting for new ones.
func (p *Pipeline) nextBatch() *batch {
	p.getMu.Lock()
	defer p.getMu.Unlock()
	o, shutdown := p.queue.Get()
	if shutdown {
		return nil
	}
	b, _ := p.rooms.Get().(*batch)
	if b == nil {
		b = &batch{}
	}
	p.take(b, o)
	for len(b.items) < p.opts.BatchSize && p.queue.Len() > 0 {
		o, shutdown := p.queue.Get()
		if shutdown {
			break
		}
		p.take(b, o)
	}
	b.taken = len(b.items)
	return b
}

// take adds o to b and moves its waiting deltas into b.
func (p *Pipeline) take(b *batch, o *object) {
	b.objs = append(b.objs, o)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(o.pending) == 0 {
		return
	}
	for i := range o.pending {
		b.items = append(b.items, item{obj: o, delta: &o.pending[i]})
	}
	o.flying = o.first
	o.pending = nil
	o.taken = o.last
	o.flyingCharged, o.charged = o.charged, 0
}

// recycle keeps the room of b's slices for a later batch, once b is
// finished: nothing reads its items any more.
func (p *Pipeline) recycle(b *batch) {
	clear(b.objs)
	clear(b.items[:b.taken])
	b.objs, b.items, b.taken = b.objs[:0], b.items[:0], 0
	p.rooms.Put(b)
}

// encode makes the message of every item, skipping those that cannot be
// encoded.
func (p *Pipeline) encode(items []item) []item {
	out := items[:0]
	for _, it := range items {
		var err error
		it.msg, it.lease, err = p.encodeDelta(it.delta)
		if err != nil {
			p.skip(it, err)
			continue
		}
		out = append(out, it)
	}
	return out
}

// encodeDelta makes the message of d, in a leased buffer when the encoder
// lends them.
func (p *Pipeline) encodeDelta(d *source.Delta) (*wire.Message, *event.Lease, error) {
	le, ok := p.enc.(LeaseEncoder)
	if !ok {
		msg, err := p.enc.Encode(d)
		return msg, nil, err
	}
	l, err := le.Lease(d)
	if err != nil {
		return nil, nil, err
	}
	return l.Message(), l, nil
}

// release gives the item's message bytes back to the encoder's pool:
// the pipeline calls it once it is done with the item, and only when no
// sink can read the message any more.
func (it *item) release() {
	if it.lease != nil {
		it.lease.Release()
		it.lease, it.msg = nil, nil
	}
}
