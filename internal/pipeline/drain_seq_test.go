package pipeline

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// waitDrain waits for the result of a Drain started by drainAsync.
func waitDrain(t *testing.T, res <-chan error, what string) {
	t.Helper()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("Drain %s = %v, want nil", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Drain %s did not return", what)
	}
}

// notReturned fails the test when the Drain behind res has returned.
func notReturned(t *testing.T, res <-chan error, what string) {
	t.Helper()
	select {
	case err := <-res:
		t.Fatalf("Drain %s returned %v too early", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestDrainIgnoresLaterDeltasOfTheSameObject checks that Drain returns
// once an object's deltas queued before it are done, although deltas of
// the same object queued after it never get through.
func TestDrainIgnoresLaterDeltasOfTheSameObject(t *testing.T) {
	releaseFirst := make(chan struct{})
	s := &sinktest.Recorder{Respond: func(ctx context.Context, _ int, msgs []*wire.Message) error {
		switch msgs[0].ResourceVersion {
		case "1":
			<-releaseFirst
		default:
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	h := newHarness(t, s, Options{}, nil)
	h.start(t)
	h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	poll.Until(t, 10*time.Second, func() (bool, string) { return s.Calls() == 1, "waiting for a's first delta to reach the sink" })
	res := drainAsync(t, h, context.Background(), 1)
	h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2))
	notReturned(t, res, "with a's first delta in the sink")
	close(releaseFirst)
	waitDrain(t, res, "after a's first delta was accepted")
	if got := h.rec.rvsOf(subject("a")); len(got) != 1 || got[0] != 1 {
		t.Errorf("a: recorded %v, want [1]", got)
	}
	if n := h.barriers(); n != 0 {
		t.Errorf("%d barriers left behind", n)
	}
}

// TestDrainWaitsForCollapsedDeltas checks that a delta collapsed into a
// later one, even one queued after Drain was called, is waited for until
// the delta that carries its state is published.
func TestDrainWaitsForCollapsedDeltas(t *testing.T) {
	const (
		workers    = 2
		maxPending = 2
	)
	release := make(chan struct{})
	s := &sinktest.Recorder{Respond: gated(release)}
	h := newHarness(t, s, Options{Workers: workers, MaxPendingPerObject: maxPending}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	for rv := 1; rv <= 5; rv++ {
		h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", rv))
	}
	first := drainAsync(t, h, context.Background(), 1)
	for rv := 6; rv <= 9; rv++ {
		h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", rv))
	}
	second := drainAsync(t, h, context.Background(), 2)
	if st := h.p.Stats(); st.Coalesced == 0 {
		t.Fatalf("nothing collapsed: %+v", st)
	}
	notReturned(t, first, "with the sink blocked")

	close(release)
	waitDrain(t, first, "first")
	waitDrain(t, second, "second")
	got := h.rec.rvsOf(subject("a"))
	if len(got) == 0 || got[len(got)-1] != 9 {
		t.Errorf("a: recorded %v, want it to end with 9", got)
	}
	if n := h.barriers(); n != 0 {
		t.Errorf("%d barriers left behind", n)
	}
}

// TestDrainCountsSkippedDeltas checks that a delta skipped after a
// terminal failure is done for Drain.
func TestDrainCountsSkippedDeltas(t *testing.T) {
	s := &sinktest.Recorder{Respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
		return perMessage(msgs, func(m *wire.Message) error {
			if m.Name == "a" {
				return sink.Terminal(errRefused)
			}
			return nil
		})
	}}
	h := newHarness(t, s, Options{}, nil)
	h.start(t)
	h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	h.p.OnDelta(mkDelta(source.Added, "b", "uid-b", 1))
	h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2))
	h.drain(t)
	if st := h.p.Stats(); st.Skipped != 2 || st.Published != 1 || st.Pending != 0 {
		t.Errorf("stats %+v, want 2 skipped, 1 published, nothing pending", st)
	}
}

// TestDrainCountsAbandonedDeltas checks that a Drain waiting when the
// pipeline stops returns once what it waited for is abandoned.
func TestDrainCountsAbandonedDeltas(t *testing.T) {
	s := &sinktest.Recorder{Respond: func(ctx context.Context, _ int, _ []*wire.Message) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	h := newHarness(t, s, Options{Workers: 1}, nil)
	h.start(t)
	for i := range 10 {
		h.p.OnDelta(mkDelta(source.Added, "cm-"+strconv.Itoa(i), "uid-"+strconv.Itoa(i), 1))
	}
	poll.Until(t, 10*time.Second, func() (bool, string) { return s.Calls() == 1, "waiting for the sink to be called" })
	res := drainAsync(t, h, context.Background(), 1)
	notReturned(t, res, "with the sink blocked")
	if err := h.stopErr(t); !errors.Is(err, ErrAbandoned) {
		t.Errorf("Run = %v, want ErrAbandoned", err)
	}
	waitDrain(t, res, "after the pipeline stopped")
	if st := h.p.Stats(); st.Abandoned != 10 || st.Pending != 0 {
		t.Errorf("stats %+v, want 10 abandoned, nothing pending", st)
	}
	// Nothing is waiting: a new Drain returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.p.Drain(ctx); err != nil {
		t.Errorf("Drain after the stop = %v, want nil", err)
	}
}

// TestConcurrentDrains queues changes of a few objects, some collapsed,
// through a sink that fails often, while Drain calls come and go. Each
// Drain returns only once every object's latest state queued before it
// is recorded, or a later one.
func TestConcurrentDrains(t *testing.T) {
	const (
		objects = 20
		rounds  = 60
	)
	s := flakySink(7, false)
	h := newHarness(t, s, Options{
		Workers: 3, BatchSize: 7, MaxPendingPerObject: 3,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
	}, nil)
	h.start(t)

	var wg sync.WaitGroup
	latest := map[string]int{} // the version of each object queued last
	rv := 0
	for round := range rounds {
		for o := range objects {
			if (o+round)%3 == 0 {
				continue
			}
			rv++
			name := "cm-" + strconv.Itoa(o)
			h.p.OnDelta(mkDelta(source.Updated, name, "uid-"+name, rv))
			latest[name] = rv
		}
		queued := maps.Clone(latest)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := h.p.Drain(ctx); err != nil {
				t.Errorf("round %d: Drain: %v", round, err)
				return
			}
			for name, want := range queued {
				if got := h.rec.rvsOf(subject(name)); len(got) == 0 || slices.Max(got) < want {
					t.Errorf("round %d: %s recorded %v when Drain returned, want up to %d", round, name, got, want)
				}
			}
		})
	}
	wg.Wait()
	if n := h.barriers(); n != 0 {
		t.Errorf("%d barriers left behind", n)
	}
}
