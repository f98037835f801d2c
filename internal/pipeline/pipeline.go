package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/bounded"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
)

// Defaults for Options.
const (
	// DefaultWorkers publish batches in parallel. A few are enough to keep
	// a bus busy while one batch waits for its acknowledgement; as many
	// batches again wait encoded (see Run).
	DefaultWorkers = 4
	// DefaultBatchSize bounds the messages in one Publish: large enough to
	// amortise a round trip, small enough that a retried batch is cheap.
	// One object's waiting deltas are never split, so a batch may exceed it
	// by up to MaxPendingPerObject-1.
	DefaultBatchSize = 500
	// DefaultMaxPendingPerObject is how many deltas of one object may wait
	// before they are collapsed. Below it every change is published; above
	// it (the sink is slow or down) only the latest state is.
	DefaultMaxPendingPerObject = 16
	// DefaultMaxRetryInterval caps the backoff between retries.
	DefaultMaxRetryInterval = 30 * time.Second
)

// Encoder turns a delta into a message.
type Encoder interface {
	Encode(d *source.Delta) (*sink.Message, error)
}

// Flusher is implemented by recorders that can make what they were given
// durable on demand, like checkpoint.Writer. With one, the pipeline records
// an intent for every created object, durably, before publishing it: see
// publish.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Recorder takes acknowledged deltas for the checkpoint. Record must not
// block on I/O.
type Recorder interface {
	Record(recs ...checkpoint.Record)
}

// Observer is told what happens to deltas, for metrics. Its methods are
// called from worker goroutines and must not block.
type Observer interface {
	// Published: the sink accepted d.
	Published(d *source.Delta)
	// Failed: publishing d failed; terminal when it is skipped for good.
	Failed(d *source.Delta, terminal bool)
	// Omitted: the sink accepted, in place of d's full event, which is
	// larger than the bus takes, an event with only the object's identity.
	// Published is called for d too.
	Omitted(d *source.Delta)
	// PublishDuration: one Publish call took this long.
	PublishDuration(time.Duration)
}

type noObserver struct{}

func (noObserver) Published(*source.Delta)       {}
func (noObserver) Failed(*source.Delta, bool)    {}
func (noObserver) Omitted(*source.Delta)         {}
func (noObserver) PublishDuration(time.Duration) {}

// Options tune a Pipeline. Zero values take the defaults above.
type Options struct {
	// Observer, when set, is told of every outcome.
	Observer            Observer
	Workers             int
	BatchSize           int
	MaxPendingPerObject int
	// NewBackOff makes the retry policy for one batch. The default is
	// exponential from 100ms, doubling, ±50% jitter, capped at
	// MaxRetryInterval, never giving up.
	NewBackOff       func() backoff.BackOff
	MaxRetryInterval time.Duration
}

// Stats are counters since the pipeline started.
type Stats struct {
	Published int64 // deltas the sink accepted
	Skipped   int64 // deltas dropped after a terminal failure
	Omitted   int64 // deltas too large for the bus, published without their content (also in Published)
	Retried   int64 // deltas sent again after a retryable failure
	Coalesced int64 // deltas collapsed into a later one while waiting
	Abandoned int64 // deltas still unpublished when the pipeline stopped
	Pending   int64 // objects with deltas waiting or in flight
}

// Pipeline queues deltas per object and publishes them with a pool of
// workers. It implements source.Handler.
type Pipeline struct {
	sink sink.Sink
	enc  Encoder
	rec  Recorder
	opts Options
	log  *slog.Logger

	queue workqueue.TypedInterface[string]
	getMu sync.Mutex // serialises batch assembly: see nextBatch

	mu       sync.Mutex
	objects  map[string]*object
	seq      uint64
	barriers map[*barrier]struct{}

	published, skipped, omitted, retried, coalesced, abandoned atomic.Int64
}

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

var _ source.Handler = (*Pipeline)(nil)

// New returns a pipeline that publishes to s and records what s accepted
// in rec.
func New(s sink.Sink, enc Encoder, rec Recorder, opts Options, log *slog.Logger) *Pipeline {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.MaxPendingPerObject <= 0 {
		opts.MaxPendingPerObject = DefaultMaxPendingPerObject
	}
	if opts.MaxRetryInterval <= 0 {
		opts.MaxRetryInterval = DefaultMaxRetryInterval
	}
	if opts.Observer == nil {
		opts.Observer = noObserver{}
	}
	if opts.NewBackOff == nil {
		maxInterval := opts.MaxRetryInterval
		opts.NewBackOff = func() backoff.BackOff {
			return capped{backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(100*time.Millisecond),
				backoff.WithMultiplier(2),
				backoff.WithRandomizationFactor(0.5),
				backoff.WithMaxInterval(maxInterval),
				backoff.WithMaxElapsedTime(0),
			), maxInterval}
		}
	}
	return &Pipeline{
		sink:     s,
		enc:      enc,
		rec:      rec,
		opts:     opts,
		log:      log,
		queue:    workqueue.NewTyped[string](),
		objects:  map[string]*object{},
		barriers: map[*barrier]struct{}{},
	}
}

// capped holds every wait of a backoff, jitter included, to max. The
// exponential backoff caps its interval before adding jitter, so on its own
// it waits up to 1.5 times its MaxInterval.
type capped struct {
	backoff.BackOff
	max time.Duration
}

func (c capped) NextBackOff() time.Duration {
	next := c.BackOff.NextBackOff()
	if next != backoff.Stop && next > c.max {
		return c.max
	}
	return next
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

// Run publishes until ctx ends, then stops the workers; a Publish in flight
// sees ctx cancelled. Call Drain first for a soft stop.
//
// Each of the Workers workers publishes one batch at a time. Next to them,
// as many assemblers take the next batches off the queue and encode them
// while the workers wait for the bus, so that encoding overlaps the wait
// for acknowledgements instead of adding to it. An assembled batch goes to
// the first worker that is free; at most Workers batches wait assembled.
func (p *Pipeline) Run(ctx context.Context) error {
	ready := make(chan batch)
	var assemblers, workers sync.WaitGroup
	for range p.opts.Workers {
		assemblers.Go(func() {
			defer utilruntime.HandleCrash()
			p.assemble(ctx, ready)
		})
		workers.Go(func() {
			defer utilruntime.HandleCrash()
			p.work(ctx, ready)
		})
	}
	<-ctx.Done()
	p.queue.ShutDown()
	assemblers.Wait()
	close(ready)
	workers.Wait()
	if n := p.abandoned.Load(); n > 0 {
		p.log.Warn("pipeline stopped with deltas unpublished; they were not checkpointed, so a restart finds them again",
			"deltas", n)
	}
	return nil
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

// Stats returns the pipeline's counters.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	pending := int64(len(p.objects))
	p.mu.Unlock()
	return Stats{
		Published: p.published.Load(),
		Skipped:   p.skipped.Load(),
		Omitted:   p.omitted.Load(),
		Retried:   p.retried.Load(),
		Coalesced: p.coalesced.Load(),
		Abandoned: p.abandoned.Load(),
		Pending:   pending,
	}
}

// item is one delta in a batch, with its message.
type item struct {
	key   string
	delta *source.Delta
	msg   *sink.Message
	// tooLarge is why the delta's full event was not published, when msg
	// is the event without the object's content sent in its place.
	tooLarge error
}

// batch is what an assembler hands to a worker: the keys it took off the
// queue and their deltas, encoded.
type batch struct {
	keys  []string
	items []item
}

// assemble takes batches off the queue, encodes them and hands them to
// the workers on ready, until the queue shuts down. After ctx ends it
// encodes nothing more: what it takes is abandoned.
func (p *Pipeline) assemble(ctx context.Context, ready chan<- batch) {
	for {
		keys := p.nextBatch()
		if keys == nil {
			return
		}
		items := p.take(keys)
		if ctx.Err() != nil {
			// Hard stop: the queue hands out what is left; do not publish
			// it with a dead context, just count it.
			p.abandoned.Add(int64(len(items)))
			p.finish(keys)
			continue
		}
		ready <- batch{keys: keys, items: p.encode(items)}
	}
}

// work publishes the batches the assemblers make until ready is closed.
func (p *Pipeline) work(ctx context.Context, ready <-chan batch) {
	for b := range ready {
		if ctx.Err() != nil {
			p.abandoned.Add(int64(len(b.items)))
		} else {
			p.publish(ctx, b.items)
		}
		p.finish(b.keys)
	}
}

// nextBatch takes keys off the queue until their waiting deltas fill a
// batch or the queue is empty. Only the worker holding getMu calls Get, so
// after the first key a non-empty queue means Get does not block: a worker
// never sits on keys it has taken while waiting for new ones.
func (p *Pipeline) nextBatch() []string {
	p.getMu.Lock()
	defer p.getMu.Unlock()
	key, shutdown := p.queue.Get()
	if shutdown {
		return nil
	}
	keys := []string{key}
	n := p.pendingLen(key)
	for n < p.opts.BatchSize && p.queue.Len() > 0 {
		key, shutdown := p.queue.Get()
		if shutdown {
			break
		}
		keys = append(keys, key)
		n += p.pendingLen(key)
	}
	return keys
}

func (p *Pipeline) pendingLen(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := p.objects[key]; o != nil {
		return len(o.pending)
	}
	return 0
}

// take moves the waiting deltas of keys into a batch.
func (p *Pipeline) take(keys []string) []item {
	var items []item
	p.mu.Lock()
	for _, key := range keys {
		o := p.objects[key]
		if o == nil {
			continue
		}
		for i := range o.pending {
			items = append(items, item{key: key, delta: &o.pending[i]})
		}
		o.pending = nil
		o.taken = o.last
	}
	p.mu.Unlock()
	return items
}

// encode makes the message of every item, skipping those that cannot be
// encoded.
func (p *Pipeline) encode(items []item) []item {
	out := items[:0]
	for _, it := range items {
		msg, err := p.enc.Encode(it.delta)
		if err != nil {
			p.skip(it, err)
			continue
		}
		it.msg = msg
		out = append(out, it)
	}
	return out
}

// publish sends items until each is accepted or skipped, or ctx ends.
//
// A delta whose event the sink finds too large for the bus
// (sink.ErrTooLarge) is encoded again without the object's content and
// sent in its place, at once, with the object's later deltas after it;
// only when that event is too large as well is the delta skipped.
func (p *Pipeline) publish(ctx context.Context, items []item) {
	if len(items) == 0 {
		return
	}
	if err := p.recordIntents(ctx, items); err != nil {
		if !checkpoint.IsTerminal(err) {
			// ctx ended: nothing is published.
			p.abandoned.Add(int64(len(items)))
			return
		}
		if items = p.abandonCreations(items, err); len(items) == 0 {
			return
		}
	}
	op := func() error {
		for {
			msgs := make([]*sink.Message, len(items))
			for i, it := range items {
				msgs[i] = it.msg
			}
			start := time.Now()
			errs := sink.PerMessage(p.sink.Publish(ctx, msgs), len(items))
			p.opts.Observer.PublishDuration(time.Since(start))

			var (
				acked []checkpoint.Record
				retry []item
				first error
			)
			// failed holds the objects whose later deltas must be sent
			// again: true after a retryable failure, false after a
			// replacement.
			failed := map[string]bool{}
			retried := 0
			for i, it := range items {
				err := errs[i]
				again, held := failed[it.key]
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
					acked = append(acked, record(it.delta))
					if it.tooLarge != nil {
						p.omitted.Add(1)
						p.opts.Observer.Omitted(it.delta)
						p.logOmitted(it)
					}
					p.opts.Observer.Published(it.delta)
				case sink.IsTooLarge(err) && it.tooLarge == nil:
					if r, ok := p.withoutContent(it, err); ok {
						failed[it.key] = false
						retry = append(retry, r)
					}
				case sink.IsTerminal(err):
					p.skip(it, err)
				default:
					failed[it.key] = true
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
	}
}

// recordIntents makes the checkpoint know of every object the batch
// creates before the batch is published. A position is recorded only
// after the sink acknowledged it, and checkpoints are flushed on an
// interval; without intents, an object published and then deleted around
// a crash would be in the stream but not in the checkpoint, and the
// restart diff could not tell consumers it is gone. An intent is a
// position with the object's uid and no resourceVersion: on restart, an
// object listed with an intent is published again as added, and one
// missing from the list is published as deleted. It returns ctx's error
// when ctx ended before the intents were durable, or the flush's error
// when no retry can fix it (checkpoint.IsTerminal), which is not retried.
func (p *Pipeline) recordIntents(ctx context.Context, items []item) error {
	f, ok := p.rec.(Flusher)
	if !ok {
		return nil
	}
	var intents []checkpoint.Record
	for _, it := range items {
		if needsIntent(it.delta) {
			intents = append(intents, checkpoint.Record{
				Resource: it.delta.Resource.Name(),
				Key:      it.delta.Key(),
				Position: checkpoint.Position{UID: string(it.delta.UID)},
			})
		}
	}
	if len(intents) == 0 {
		return nil
	}
	p.rec.Record(intents...)
	notify := func(err error, wait time.Duration) {
		p.log.Warn("checkpoint flush before publishing new objects failed; retrying", "err", err, "in", wait.Round(time.Millisecond))
	}
	flush := func() error {
		err := f.Flush(ctx)
		if checkpoint.IsTerminal(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	return backoff.RetryNotify(flush, backoff.WithContext(p.opts.NewBackOff(), ctx), notify)
}

// needsIntent reports whether d may be published only once the checkpoint
// durably holds an intent for its object: see recordIntents.
func needsIntent(d *source.Delta) bool { return d.Type == source.Added }

// abandonCreations abandons the items that need an intent, after the
// flush of intents failed with damaged, an error no retry can fix, and
// returns the rest, to be published. A creation is never published
// without its intent; a delete or an update needs none, and abandoning it
// would lose it for good: the next start refuses the damaged store, and
// after a fresh start the bridge no longer knows what was deleted. The
// bridge stops on the damaged store (the checkpoint writer returns the
// same error); what is published meanwhile cannot be checkpointed.
func (p *Pipeline) abandonCreations(items []item, damaged error) []item {
	var rest []item
	for _, it := range items {
		if !needsIntent(it.delta) {
			rest = append(rest, it)
		}
	}
	if n := len(items) - len(rest); n > 0 {
		p.abandoned.Add(int64(n))
		p.log.Error("the checkpoint store is damaged: creations abandoned unpublished, since their intents cannot be recorded; deletes and updates are published",
			"abandoned", n, "publishing", len(rest), "err", damaged)
	}
	return rest
}

// withoutContent is it with the event of its delta without the object's
// content, to send in place of the full event, which failed with
// tooLarge. When that event cannot be encoded, it skips the delta.
func (p *Pipeline) withoutContent(it item, tooLarge error) (item, bool) {
	d := *it.delta
	d.ContentOmitted = true
	msg, err := p.enc.Encode(&d)
	if err != nil {
		p.skip(it, fmt.Errorf("%w; without its content: %w", tooLarge, err))
		return item{}, false
	}
	return item{key: it.key, delta: &d, msg: msg, tooLarge: tooLarge}, true
}

func (p *Pipeline) logOmitted(it item) {
	p.log.Warn("change published without its content: its event is larger than the bus takes",
		"resource", it.delta.Resource.Name(), "namespace", it.delta.Namespace, "name", bounded.Abbrev(it.delta.Name),
		"uid", it.delta.UID, "resourceVersion", it.delta.ResourceVersion, "type", it.delta.Type, "err", it.tooLarge)
}

func (p *Pipeline) skip(it item, err error) {
	p.skipped.Add(1)
	p.opts.Observer.Failed(it.delta, true)
	p.log.Error("skipping delta that cannot be published",
		"resource", it.delta.Resource.Name(), "namespace", it.delta.Namespace, "name", bounded.Abbrev(it.delta.Name),
		"uid", it.delta.UID, "resourceVersion", it.delta.ResourceVersion, "type", it.delta.Type, "err", err)
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

func record(d *source.Delta) checkpoint.Record {
	return checkpoint.Record{
		Resource: d.Resource.Name(),
		Key:      d.Key(),
		Position: checkpoint.Position{UID: string(d.UID), ResourceVersion: d.ResourceVersion},
		Deleted:  d.Type == source.Deleted,
	}
}
