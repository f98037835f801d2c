package pipeline

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// onDeltaAsync hands d to h's pipeline from a goroutine of its own, as an
// informer does, and returns a channel closed when OnDelta returned.
func onDeltaAsync(h *harness, d source.Delta) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.p.OnDelta(d)
	}()
	return done
}

// handOn hands d to h's pipeline as onDeltaAsync does, failing the test
// unless OnDelta returns within 10s: a budget never given back would
// otherwise hold the test until go test's timeout.
func handOn(t *testing.T, h *harness, d source.Delta) {
	t.Helper()
	done := onDeltaAsync(h, d)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return returned(done), "waiting for OnDelta of " + d.Name + " to return"
	})
}

// blockerWeight is what each of blockPipeline's deltas weighs.
func blockerWeight() int64 {
	return weight(new(mkDelta(source.Added, "blocker-0", "uid-blocker", 1)))
}

func returned(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestBudgetHoldsSourceBack stalls the sink and hands the pipeline more
// than MaxPendingBytes of deltas: the delta past the budget waits in
// OnDelta, counted as held, until the sink accepts what is in flight;
// then everything is published, and the budget is empty again.
func TestBudgetHoldsSourceBack(t *testing.T) {
	const workers = 1
	var fits []source.Delta
	budget := 2 * blockerWeight()
	for i := range 3 {
		d := mkDelta(source.Added, "fits-"+strconv.Itoa(i), "uid-fits-"+strconv.Itoa(i), 10+i)
		fits = append(fits, d)
		budget += weight(&d)
	}
	release := make(chan struct{})
	s := &sinktest.Recorder{Respond: gated(release)}
	// Room for the two blockers and the three deltas that fit.
	h := newHarness(t, s, Options{Workers: workers, MaxPendingBytes: budget}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	for _, d := range fits {
		handOn(t, h, d)
	}
	if st := h.p.Stats(); st.Held != 0 || st.PendingBytes != budget {
		t.Fatalf("after 5 deltas filling a budget of %d B: Held = %d, PendingBytes = %d; want 0, %d", budget, st.Held, st.PendingBytes, budget)
	}

	done := onDeltaAsync(h, mkDelta(source.Added, "over", "uid-over", 20))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return h.p.Stats().Held == 1, "waiting for the delta past the budget to be held"
	})
	// The time held is counted while the wait goes on, not only once it
	// is over.
	poll.Until(t, 10*time.Second, func() (bool, string) {
		st := h.p.Stats()
		return st.Holding == 1 && st.HeldFor > 0, "waiting for the wait going on to be counted"
	})
	if returned(done) {
		t.Fatal("OnDelta returned while the budget was full and the sink accepted nothing")
	}

	close(release)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return returned(done), "waiting for OnDelta to return once the sink accepted the blockers"
	})
	h.drain(t)
	st := h.p.Stats()
	if st.Published != 6 || st.PendingBytes != 0 || st.Held != 1 || st.HeldFor <= 0 {
		t.Errorf("after drain: Published = %d, PendingBytes = %d, Held = %d, HeldFor = %s; want 6, 0, 1, > 0",
			st.Published, st.PendingBytes, st.Held, st.HeldFor)
	}
	if got := acceptedOf(s, subject("over")); len(got) != 1 {
		t.Errorf("the held delta was accepted %d times, want once", len(got))
	}
	h.stop(t)
}

// TestBudgetStopEndsWait checks that Run's stop ends a wait for room: the
// held delta is abandoned, and Run says so.
func TestBudgetStopEndsWait(t *testing.T) {
	const workers = 1
	release := make(chan struct{})
	defer close(release)
	s := &sinktest.Recorder{Respond: gated(release)}
	h := newHarness(t, s, Options{Workers: workers, MaxPendingBytes: 2 * blockerWeight()}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	done := onDeltaAsync(h, mkDelta(source.Added, "over", "uid-over", 20))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return h.p.Stats().Held == 1, "waiting for the delta past the budget to be held"
	})
	err := h.stopErr(t)
	if !errors.Is(err, ErrAbandoned) {
		t.Errorf("Run = %v, want ErrAbandoned", err)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return returned(done), "waiting for the held OnDelta to return once Run stopped"
	})
	// The two blockers and the held delta.
	if st := h.p.Stats(); st.Abandoned != 3 {
		t.Errorf("Abandoned = %d, want 3", st.Abandoned)
	}
	if got := acceptedOf(s, subject("over")); len(got) != 0 {
		t.Errorf("the held delta was accepted after Run stopped: %v", got)
	}
}

// TestBudgetHeavyDeltaGoesAlone checks that a delta heavier than the whole
// budget is not held forever: it waits until nothing else is pending, then
// goes alone.
func TestBudgetHeavyDeltaGoesAlone(t *testing.T) {
	const workers = 1
	heavy := rawDelta(t, "heavy", 64<<10)
	release := make(chan struct{})
	s := &sinktest.Recorder{Respond: gated(release)}
	h := newHarness(t, s, Options{Workers: workers, MaxPendingBytes: weight(&heavy) / 4}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	done := onDeltaAsync(h, heavy)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return h.p.Stats().Held == 1, "waiting for the heavy delta to be held behind the blockers"
	})
	close(release)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return returned(done), "waiting for the heavy delta to be queued once nothing else was pending"
	})
	h.drain(t)
	if got := acceptedOf(s, subject("heavy")); len(got) != 1 {
		t.Errorf("the heavy delta was accepted %d times, want once", len(got))
	}
	if st := h.p.Stats(); st.PendingBytes != 0 {
		t.Errorf("PendingBytes = %d after drain, want 0", st.PendingBytes)
	}
	h.stop(t)
}

// TestBudgetCollapseGivesRoomBack stalls the sink and updates one object
// far more often than its deltas may wait: the collapsed deltas give
// their room back, so a budget of a few deltas never holds the source.
func TestBudgetCollapseGivesRoomBack(t *testing.T) {
	const (
		workers    = 1
		maxPending = 2
	)
	heaviest := weight(new(mkDelta(source.Updated, "busy", "uid-busy", 200)))
	release := make(chan struct{})
	s := &sinktest.Recorder{Respond: gated(release)}
	budget := 2*blockerWeight() + int64(maxPending+1)*heaviest
	h := newHarness(t, s, Options{Workers: workers, MaxPendingPerObject: maxPending, MaxPendingBytes: budget}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	for rv := 1; rv <= 200; rv++ {
		typ := source.Updated
		if rv == 1 {
			typ = source.Added
		}
		done := onDeltaAsync(h, mkDelta(typ, "busy", "uid-busy", rv))
		poll.Until(t, 10*time.Second, func() (bool, string) {
			return returned(done) || h.p.Stats().Held > 0, "waiting for OnDelta to return or be held"
		})
		if st := h.p.Stats(); st.Held != 0 || st.PendingBytes > budget {
			t.Fatalf("update %d: Held = %d, PendingBytes = %d of %d: collapsed deltas kept their room", rv, st.Held, st.PendingBytes, budget)
		}
	}
	close(release)
	h.drain(t)
	if st := h.p.Stats(); st.PendingBytes != 0 || st.Coalesced == 0 {
		t.Errorf("after drain: PendingBytes = %d, Coalesced = %d; want 0, > 0", st.PendingBytes, st.Coalesced)
	}
	h.stop(t)
}

// TestBudgetEmptiesWhateverTheOutcome publishes deltas that the sink
// accepts, refuses for good, refuses for now, or finds too large, and
// checks that once all are done nothing is left charged: every outcome
// gives its room back.
func TestBudgetEmptiesWhateverTheOutcome(t *testing.T) {
	var calls atomic.Int64
	s := &sinktest.Recorder{Respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
		n := calls.Add(1)
		return perMessage(msgs, func(m *wire.Message) error {
			rv, _ := strconv.Atoi(m.ResourceVersion)
			switch {
			case rv%5 == 1 && n%2 == 1:
				return errors.New("not now")
			case rv%5 == 2:
				return sink.Terminal(errRefused)
			case rv%5 == 3 && !m.ContentOmitted:
				return sink.TooLarge(errors.New("too large"))
			}
			return nil
		})
	}}
	h := newHarness(t, s, Options{
		Workers: 2, BatchSize: 7, MaxPendingPerObject: 3, MaxPendingBytes: 10 * weight(new(mkDelta(source.Added, "x", "uid-x", 1))),
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
	}, nil)
	h.start(t)
	rv := 0
	for round := range 20 {
		for o := range 10 {
			rv++
			typ := source.Updated
			if round == 0 {
				typ = source.Added
			}
			handOn(t, h, mkDelta(typ, "cm-"+strconv.Itoa(o), "uid-"+strconv.Itoa(o), rv))
		}
	}
	h.drain(t)
	st := h.p.Stats()
	if st.PendingBytes != 0 || st.Pending != 0 {
		t.Errorf("after drain: PendingBytes = %d, Pending = %d objects; want 0, 0", st.PendingBytes, st.Pending)
	}
	if st.Skipped == 0 || st.Omitted == 0 || st.Retried == 0 {
		t.Errorf("Skipped = %d, Omitted = %d, Retried = %d: want every outcome at least once", st.Skipped, st.Omitted, st.Retried)
	}
	h.stop(t)
}

// rawDelta is an Added delta of ConfigMap ns/name on the raw path, whose
// JSON has a data value of size bytes.
func rawDelta(t *testing.T, name string, size int) source.Delta {
	t.Helper()
	data := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"` + ns + `","name":"` + name +
		`","uid":"uid-` + name + `","resourceVersion":"1"},"data":{"v":"` + strings.Repeat("x", size) + `"}}`
	raw, err := source.NewRawObject([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return source.Delta{
		Type: source.Added, Resource: configmaps, Namespace: ns, Name: name,
		UID: types.UID("uid-" + name), ResourceVersion: "1", Raw: raw,
	}
}

// TestBudgetStopHoldingLetsWaitersIn checks that StopHolding, called when
// the source stops, lets a delta waiting for room in at once, uncharged,
// and every later one too; they are published like any other once the
// sink takes them, and nothing is left charged.
func TestBudgetStopHoldingLetsWaitersIn(t *testing.T) {
	const workers = 1
	bw := blockerWeight()
	release := make(chan struct{})
	s := &sinktest.Recorder{Respond: gated(release)}
	h := newHarness(t, s, Options{Workers: workers, MaxPendingBytes: 2 * bw}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	done := onDeltaAsync(h, mkDelta(source.Added, "held", "uid-held", 20))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return h.p.Stats().Held == 1, "waiting for the delta past the budget to be held"
	})
	h.p.StopHolding()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return returned(done), "waiting for the held OnDelta to return after StopHolding"
	})
	handOn(t, h, mkDelta(source.Added, "later", "uid-later", 21))
	if st := h.p.Stats(); st.Held != 1 || st.Holding != 0 || st.PendingBytes != 2*bw {
		t.Errorf("after StopHolding: Held = %d, Holding = %d, PendingBytes = %d; want 1, 0, %d (the blockers only)", st.Held, st.Holding, st.PendingBytes, 2*bw)
	}
	close(release)
	h.drain(t)
	for _, name := range []string{"held", "later"} {
		if got := acceptedOf(s, subject(name)); len(got) != 1 {
			t.Errorf("%s was accepted %d times, want once", name, len(got))
		}
	}
	if st := h.p.Stats(); st.PendingBytes != 0 || st.Abandoned != 0 {
		t.Errorf("after drain: PendingBytes = %d, Abandoned = %d; want 0, 0", st.PendingBytes, st.Abandoned)
	}
	h.stop(t)
}

// TestWeight checks what deltas are charged: a raw object its JSON, a
// decoded one (the parsed path) about its size, whatever its size.
func TestWeight(t *testing.T) {
	raw := rawDelta(t, "raw", 64<<10)
	if got, want := weight(&raw), int64(len(raw.Raw.Data())+deltaOverhead); got != want {
		t.Errorf("raw delta of %d B weighs %d, want %d", len(raw.Raw.Data()), got, want)
	}
	small := mkDelta(source.Updated, "cm", "uid-cm", 2)
	large := mkDelta(source.Updated, "cm", "uid-cm", 2)
	large.Object.Object["data"] = map[string]any{"v": strings.Repeat("x", 64<<10)}
	large.OldObject = large.Object
	ws, wl := weight(&small), weight(&large)
	if ws >= 1<<10 || wl < 2*64<<10 || wl > 2*64<<10+4<<10 {
		t.Errorf("decoded deltas weigh %d B (no data) and %d B (64 KiB of data, old object too): want under 1 KiB, and 128 KiB to 132 KiB", ws, wl)
	}
}

// TestBudgetHeldForNeverGoesBack reads the time held while waits begin and
// end on every side: it is a counter (bridge_source_held_seconds_total),
// so it must never go back.
func TestBudgetHeldForNeverGoesBack(t *testing.T) {
	b := newBudget(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if n, ok := b.take(1); ok {
					b.give(n)
				}
			}
		})
	}
	var last time.Duration
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		_, _, took := b.waitStats()
		if took < last {
			t.Fatalf("the time held went back from %s to %s", last, took)
		}
		last = took
	}
	close(stop)
	wg.Wait()
	if waits, _, _ := b.waitStats(); waits == 0 {
		t.Fatal("no wait for room in 300ms of four callers on a budget of 1: the test measured nothing")
	}
}
