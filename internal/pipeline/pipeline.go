package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// The Pipeline itself: what it is built from (a sink, an encoder, a
// recorder, options), its lifecycle (New, Run) and its counters. The
// queue, assembly, publishing and intents each have a file of their own.

// Defaults for Options, and so for the variables that set them
// (BRIDGE_WORKERS, BRIDGE_BATCH_SIZE, BRIDGE_MAX_PENDING_PER_OBJECT,
// BRIDGE_MAX_PENDING_BYTES, BRIDGE_RETRY_MAX_INTERVAL): internal/config
// reads them from here.
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
	// DefaultMaxPendingBytes bounds what the deltas not done weigh (their
	// objects' JSON, see weight) before OnDelta waits for the sink, so
	// that the memory a first sync of a large cluster takes does not
	// depend on how far the source gets ahead of the bus. It holds some
	// 3,600 deltas of objects of about 2 KiB, nearly the 4,000 that the
	// default Workers and BatchSize have waiting and in flight; larger
	// objects share it (800 Pods of 10 KiB). Measured on 50,000
	// ConfigMaps of 2 KiB with a sink slowed to one worker and batches of
	// 5, a first sync peaks at 109 MiB with it, 130 MiB with twice as
	// much, and 370 MiB without a bound.
	DefaultMaxPendingBytes = 8 << 20
	// DefaultMaxRetryInterval caps the backoff between retries. Thirty
	// seconds keeps a long outage from turning into a hammering retry loop
	// while still noticing recovery quickly.
	DefaultMaxRetryInterval = 30 * time.Second
)

// Encoder turns a delta into a message. It must not keep d once it
// returned (the message may share what d points to): the pipeline reuses
// the room its deltas wait in.
type Encoder interface {
	Encode(d *source.Delta) (*wire.Message, error)
}

// LeaseEncoder is an Encoder that can write messages into buffers lent by
// a pool (event.Encoder): the pipeline then takes every message from
// Lease, and releases each lease once no sink can read the message any
// more (see publish).
type LeaseEncoder interface {
	Encoder
	Lease(d *source.Delta) (*event.Lease, error)
}

// Recorder takes acknowledged deltas for the checkpoint. Record must not
// block on I/O, and must not keep recs once it returns (the records
// themselves it may copy): the pipeline reuses it.
type Recorder interface {
	Record(recs ...checkpoint.Record)
}

// Observer is told what happens to deltas, for metrics. Its methods are
// called from worker goroutines and must not block, nor keep d once they
// returned: the pipeline reuses the room its deltas wait in.
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
	Observer Observer
	// Intents, when set, makes an intent durable for every created object
	// before the object is published (see IntentRecorder). Unset, the
	// creations are published at once, and a restart may miss the delete
	// of an object created and deleted around a crash.
	Intents             IntentRecorder
	Workers             int
	BatchSize           int
	MaxPendingPerObject int
	// MaxPendingBytes is the most the deltas not done may weigh (see
	// budget); OnDelta waits for room past it.
	MaxPendingBytes int64
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
	// PendingBytes is what the deltas waiting or in flight weigh, against
	// Options.MaxPendingBytes.
	PendingBytes int64
	// Held counts the OnDelta calls that waited for room, and HeldFor
	// how long they waited in all, those still waiting counted up to now:
	// the time the source was held back because the sink was slower.
	// Holding is how many wait now.
	Held    int64
	HeldFor time.Duration
	Holding int64
}

// Pipeline queues deltas per object and publishes them with a pool of
// workers. It implements source.Handler.
type Pipeline struct {
	sink sink.Sink
	enc  Encoder
	rec  Recorder
	opts Options
	log  *slog.Logger

	queue  workqueue.TypedInterface[*object]
	budget *budget
	getMu  sync.Mutex // serialises batch assembly: see nextBatch
	rooms  sync.Pool  // of *batch finished, to reuse

	mu sync.Mutex
	// closed is set, and the queue shut down, under mu once Run stops:
	// OnDelta queues nothing after that.
	closed   bool
	objects  map[string]*object
	seq      uint64
	barriers []*barrier

	published, skipped, omitted, retried, coalesced, abandoned atomic.Int64
}

var _ source.Holder = (*Pipeline)(nil)

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
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if opts.MaxRetryInterval <= 0 {
		opts.MaxRetryInterval = DefaultMaxRetryInterval
	}
	if opts.Observer == nil {
		opts.Observer = noObserver{}
	}
	if opts.NewBackOff == nil {
		opts.NewBackOff = defaultBackOff(opts.MaxRetryInterval)
	}
	p := &Pipeline{
		sink:    s,
		enc:     enc,
		rec:     rec,
		opts:    opts,
		log:     log,
		queue:   workqueue.NewTyped[*object](),
		budget:  newBudget(opts.MaxPendingBytes),
		objects: map[string]*object{},
	}
	return p
}

// ErrAbandoned is wrapped by the error Run returns when the pipeline
// abandoned deltas: it never published them, so they were never
// checkpointed either.
var ErrAbandoned = errors.New("deltas abandoned unpublished")

// Run publishes until ctx ends, then stops the workers; a Publish in flight
// sees ctx cancelled. Call Drain first for a soft stop. Call Run once.
//
// Run returns nil when it stopped with no delta abandoned. Otherwise it
// returns an error wrapping ErrAbandoned that says how many were: those
// still unpublished when ctx ended, and the creations abandoned earlier
// because the checkpoint store was found damaged (see Options.Intents).
// The caller decides what that means; at a hard stop it is expected, as
// the next start finds those deltas again (on a damaged store, which the
// next start refuses, they are lost). Nothing else ends Run or makes it
// fail: what can be retried is retried until ctx ends, and what cannot is
// skipped and counted (Stats.Skipped).
//
// Each of the Workers workers publishes one batch at a time. Next to them,
// as many assemblers take the next batches off the queue and encode them
// while the workers wait for the bus, so that encoding overlaps the wait
// for acknowledgements instead of adding to it. An assembled batch goes to
// the first worker that is free; at most Workers batches wait assembled.
func (p *Pipeline) Run(ctx context.Context) error {
	ready := make(chan *batch)
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
	p.budget.end(stopped)
	p.mu.Lock()
	p.closed = true
	p.queue.ShutDown()
	p.mu.Unlock()
	assemblers.Wait()
	close(ready)
	workers.Wait()
	// An object given a delta while its last batch was in flight went
	// back on the queue when that batch finished, which may be after the
	// assemblers stopped: its deltas are abandoned here.
	for b := p.nextBatch(); b != nil; b = p.nextBatch() {
		p.abandoned.Add(int64(len(b.items)))
		p.finish(b.objs)
		p.recycle(b)
	}
	if n := p.abandoned.Load(); n > 0 {
		return fmt.Errorf("pipeline: stopped with %d %w; they were not checkpointed", n, ErrAbandoned)
	}
	return nil
}

// StopHolding lets every OnDelta waiting for room through, and every later
// one, without waiting (source.Holder): a source.Set calls it as it
// stops, so that a sink that takes nothing cannot keep the source from
// stopping. What the source hands on after that is the little it had read
// already; Drain and Run treat it like any other delta.
func (p *Pipeline) StopHolding() { p.budget.end(open) }

// Stats returns the pipeline's counters.
func (p *Pipeline) Stats() Stats {
	held, holding, heldFor := p.budget.waitStats()
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

		PendingBytes: p.budget.held.Load(),
		Held:         held,
		HeldFor:      heldFor,
		Holding:      holding,
	}
}
