package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// flushingRecorder keeps what was made durable, in order, apart from what
// is only recorded. Like the checkpoint writer, it makes intents durable
// by recording them and flushing.
type flushingRecorder struct {
	mu      sync.Mutex
	pending []checkpoint.Record
	durable []checkpoint.Record
}

func (r *flushingRecorder) Record(recs ...checkpoint.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, recs...)
}

func (r *flushingRecorder) RecordIntents(_ context.Context, intents ...checkpoint.Intent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, in := range intents {
		r.pending = append(r.pending, in.Record())
	}
	r.durable = append(r.durable, r.pending...)
	r.pending = nil
	return nil
}

func (r *flushingRecorder) isDurable(key, uid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.durable {
		if rec.Key == key && rec.UID == uid {
			return true
		}
	}
	return false
}

// intentRecorder is a checkpoint that takes both positions and intents.
type intentRecorder interface {
	Recorder
	IntentRecorder
}

// newIntentPipeline is a pipeline with opts that publishes each delta's
// identity to s and records positions and intents in rec.
func newIntentPipeline(s sink.Sink, rec intentRecorder, opts Options) *Pipeline {
	opts.Intents = rec
	return New(s, encodeFunc(func(d *source.Delta) (*wire.Message, error) {
		return &wire.Message{Subject: d.Key(), UID: string(d.UID), Action: string(d.Type), ResourceVersion: d.ResourceVersion, Resource: d.Resource.GroupVersionResource}, nil
	}), rec, opts, slog.New(slog.DiscardHandler))
}

// runUntilEnd runs p until the test ends; what Run returns is not the
// test's concern.
func runUntilEnd(t *testing.T, p *Pipeline) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Before an object's creation is published, the checkpoint durably holds
// an intent for it (its uid, no resourceVersion); updates need none.
func TestIntentsBeforeCreates(t *testing.T) {
	rec := &flushingRecorder{}
	// The sink fails the test if an added object is published before the
	// checkpoint durably knows of it.
	s := &sinktest.Recorder{Respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
		for _, m := range msgs {
			if m.Action == "added" && !rec.isDurable(m.Subject, m.UID) {
				t.Errorf("%s published before its intent was durable", m.Subject)
			}
		}
		return nil
	}}
	p := newIntentPipeline(s, rec, Options{})
	runUntilEnd(t, p)

	p.OnDelta(mkDelta(source.Added, "a", "ua", 1))
	p.OnDelta(mkDelta(source.Added, "b", "ub", 2))
	p.OnDelta(mkDelta(source.Updated, "a", "ua", 3))
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if err := p.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	intents := 0
	for _, r := range rec.durable {
		if r.IsIntent() {
			intents++
		}
	}
	if intents != 2 {
		t.Errorf("%d intents made durable, want 2 (one per created object): %+v", intents, rec.durable)
	}
}

// brokenRecorder's store is damaged: every flush fails with an error no
// retry can fix.
type brokenRecorder struct {
	mu      sync.Mutex
	flushes int
}

func (r *brokenRecorder) Record(...checkpoint.Record) {}

func (r *brokenRecorder) RecordIntents(context.Context, ...checkpoint.Intent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
	return fmt.Errorf("checkpoint: commit to /var/lib/bridge/checkpoint.db: %w", checkpoint.ErrCorrupt)
}

// A flush of intents that fails with an error no retry can fix
// (checkpoint.IsTerminal) is not retried: the creation is abandoned, as
// the bridge stops on such an error, and nothing is published without its
// intent.
func TestIntentsTerminalFlushError(t *testing.T) {
	rec := &brokenRecorder{}
	s := &sinktest.Recorder{}
	p := newIntentPipeline(s, rec, Options{})
	runUntilEnd(t, p)

	p.OnDelta(mkDelta(source.Added, "a", "ua", 1))
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	if err := p.Drain(dctx); err != nil {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		t.Fatalf("Drain: %v; abandoned %d, flushes %d: the flush is retried", err, p.Stats().Abandoned, rec.flushes)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if a := p.Stats().Abandoned; a != 1 || rec.flushes != 1 || s.Calls() != 0 {
		t.Errorf("abandoned %d, flushes %d, publish calls %d; want 1, 1, 0", a, rec.flushes, s.Calls())
	}
}

// With a damaged store, only what needs an intent (a creation) is
// abandoned; a delete and an update in the same batch are published. On a
// damaged store abandoned means lost: the next start refuses the file, and
// after a fresh start the bridge never learns the deleted object existed.
func TestIntentsTerminalFlushErrorPublishesTheRest(t *testing.T) {
	rec := &brokenRecorder{}
	s := &sinktest.Recorder{}
	p := newIntentPipeline(s, rec, Options{Workers: 1})
	// Queued before the workers start, so that they form one batch.
	p.OnDelta(mkDelta(source.Added, "new", "un", 1))
	p.OnDelta(mkDelta(source.Deleted, "gone", "ug", 2))
	p.OnDelta(mkDelta(source.Updated, "changed", "uc", 3))
	runUntilEnd(t, p)
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	if err := p.Drain(dctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	var got []string
	for _, a := range allAccepted(s) {
		got = append(got, a.Action+" "+a.Subject)
	}
	want := []string{"deleted " + subject("gone"), "updated " + subject("changed")}
	if !slices.Equal(got, want) || p.Stats().Abandoned != 1 {
		t.Errorf("published %q, abandoned %d; want %q, abandoned 1 (the creation, which needs an intent)",
			got, p.Stats().Abandoned, want)
	}
}
