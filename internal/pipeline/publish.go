package pipeline

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/bounded"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// Publishing: a worker sends an assembled batch to the sink and records
// in the checkpoint what the sink accepted. What failed retryably is sent
// again with backoff, together with every later delta of its object, so
// that order holds; what failed for good is skipped and counted.
//
// Messages' bytes are lent by the encoder's pool (LeaseEncoder), and the
// worker gives each back (item.release) once, when it is done with the
// message: after the sink accepted it, after it was skipped for good,
// after an event without the object's content took its place, or when it
// is abandoned unpublished. A sink keeps nothing of the bytes once Publish
// returned (see sink.Sink); a message sent again after a failure is the
// same message, still held. Only the bytes of a Publish that returned
// after ctx ended are not given back, but left to the garbage collector:
// a sink cut short may leave them with its bus's client, which may still
// send them.

// work publishes the batches the assemblers make until ready is closed.
func (p *Pipeline) work(ctx context.Context, ready <-chan *batch) {
	// acked holds the records of a batch: the Recorder keeps none of
	// them, so the next batch reuses it.
	var acked []checkpoint.Record
	for b := range ready {
		if ctx.Err() != nil {
			p.abandoned.Add(int64(len(b.items)))
			releaseAll(b.items)
		} else {
			acked = p.publish(ctx, b.items, acked)
		}
		p.finish(b.objs)
		p.recycle(b)
	}
}

// publish sends items until each is accepted or skipped, or ctx ends.
// It records what is accepted in acked, emptied, and returns it for the
// next batch to reuse.
//
// A delta whose event the sink finds too large for the bus
// (sink.ErrTooLarge) is encoded again without the object's content and
// sent in its place, at once, with the object's later deltas after it;
// only when that event is too large as well is the delta skipped.
func (p *Pipeline) publish(ctx context.Context, items []item, acked []checkpoint.Record) []checkpoint.Record {
	if len(items) == 0 {
		return acked
	}
	if err := p.recordIntents(ctx, items); err != nil {
		if !checkpoint.IsTerminal(err) {
			// ctx ended: nothing is published.
			p.abandoned.Add(int64(len(items)))
			releaseAll(items)
			return acked
		}
		if items = p.abandonCreations(items, err); len(items) == 0 {
			return acked
		}
	}
	// cut is set when a Publish returned after ctx ended: the bytes of
	// what it was given are no longer given back (see above).
	cut := false
	// done is called once the pipeline is done with an item sent in the
	// last Publish.
	done := func(it item) {
		if !cut {
			it.release()
		}
	}
	op := func() error {
		for {
			msgs := make([]*wire.Message, len(items))
			for i, it := range items {
				msgs[i] = it.msg
			}
			start := time.Now()
			var errs []error // nil: every message was accepted
			if err := p.sink.Publish(ctx, msgs); err != nil {
				errs = sink.PerMessage(err, len(items))
			}
			p.opts.Observer.PublishDuration(time.Since(start))
			cut = ctx.Err() != nil

			var (
				retry []item
				first error
			)
			acked = slices.Grow(acked, len(items))
			// failed holds the objects whose later deltas must be sent
			// again: true after a retryable failure, false after a
			// replacement.
			failed := map[*object]bool{}
			retried := 0
			for i, it := range items {
				var err error
				if errs != nil {
					err = errs[i]
				}
				again, held := failed[it.obj]
				switch {
				case held:
					// An earlier delta of this object failed or is replaced:
					// send this one again after it, even if it was accepted,
					// to keep order.
					retry = append(retry, it)
					if again {
						retried++
					}
				case err == nil:
					acked = append(acked, record(it))
					if it.tooLarge != nil {
						p.omitted.Add(1)
						p.opts.Observer.Omitted(it.delta)
						p.logOmitted(it)
					}
					p.opts.Observer.Published(it.delta)
					done(it)
				case sink.IsTooLarge(err) && it.tooLarge == nil:
					if r, ok := p.withoutContent(it, err); ok {
						failed[it.obj] = false
						retry = append(retry, r)
					}
					done(it)
				case sink.IsTerminal(err):
					p.skip(it, err)
					done(it)
				default:
					failed[it.obj] = true
					retry = append(retry, it)
					retried++
					p.opts.Observer.Failed(it.delta, false)
					if first == nil {
						first = err
					}
				}
			}
			if len(acked) > 0 {
				p.rec.Record(acked...)
				p.published.Add(int64(len(acked)))
				clear(acked) // let what the records point to be collected
				acked = acked[:0]
			}
			items = retry
			if len(retry) == 0 {
				return nil
			}
			if ctx.Err() != nil {
				return backoff.Permanent(ctx.Err())
			}
			if first == nil {
				// Only replacements, and what follows them: nothing to wait
				// for.
				continue
			}
			p.retried.Add(int64(retried))
			return fmt.Errorf("%d of %d messages not accepted: %w", retried, len(msgs), first)
		}
	}
	notify := func(err error, wait time.Duration) {
		p.log.Warn("publish failed; retrying", "err", err, "in", wait.Round(time.Millisecond))
	}
	if err := backoff.RetryNotify(op, backoff.WithContext(p.opts.NewBackOff(), ctx), notify); err != nil {
		// Only the end of ctx stops the retries: what is left is abandoned.
		p.abandoned.Add(int64(len(items)))
		for _, it := range items {
			done(it)
		}
	}
	return acked
}

// releaseAll releases the items of a batch abandoned before any of it
// was sent.
func releaseAll(items []item) {
	for _, it := range items {
		it.release()
	}
}

func (p *Pipeline) skip(it item, err error) {
	p.skipped.Add(1)
	p.opts.Observer.Failed(it.delta, true)
	p.log.Error("skipping delta that cannot be published",
		"resource", it.delta.Resource.Name(), "namespace", it.delta.Namespace, "name", bounded.Abbrev(it.delta.Name),
		"uid", it.delta.UID, "resourceVersion", it.delta.ResourceVersion, "type", it.delta.Type, "err", err)
}

// record is the checkpoint record of a published item: its delta's
// position, and its state in the view it went through, which a restart
// compares with. The resource's name and the object's key are parts of
// the object's key in the pipeline, not built again.
func record(it item) checkpoint.Record {
	d := it.delta
	return checkpoint.Record{
		Resource: it.obj.resource(),
		Key:      it.obj.objectKey(),
		Position: checkpoint.Position{UID: string(d.UID), ResourceVersion: d.ResourceVersion, View: d.View},
		Deleted:  d.Type == source.Deleted,
	}
}
