package pipeline

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// runBubbled runs a pipeline around respond inside the current synctest
// bubble, queues one delta, and waits until it is published. It returns
// the (fake) times of every Publish call.
//
// It runs one worker. With more, the idle workers wait for getMu, which
// the worker inside queue.Get holds; a goroutine waiting for a mutex is
// not durably blocked, so the bubble would never go idle and fake time
// would never advance.
func runBubbled(t *testing.T, opts Options, respond func(call int, now time.Time) error) ([]time.Time, Stats) {
	t.Helper()
	opts.Workers = 1
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	s := &sinktest.Recorder{Respond: func(_ context.Context, call int, _ []*wire.Message) error {
		now := time.Now()
		mu.Lock()
		calls = append(calls, now)
		mu.Unlock()
		return respond(call, now)
	}}
	h := newHarness(t, s, opts, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx) }()

	h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	if err := h.p.Drain(t.Context()); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := h.rec.rvsOf(subject("a")); !slices.Equal(got, []int{1}) {
		t.Fatalf("recorded %v, want [1]", got)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(calls), h.p.Stats()
}

// TestDefaultBackoff checks the default retry policy in fake time:
// exponential from 100ms, doubling, ±50% jitter, and never a wait longer
// than MaxRetryInterval, which BRIDGE_RETRY_MAX_INTERVAL documents as "the
// longest wait between retries".
func TestDefaultBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			failures = 40
			maxWait  = time.Second
		)
		calls, st := runBubbled(t, Options{MaxRetryInterval: maxWait}, func(call int, _ time.Time) error {
			if call <= failures {
				return errDown
			}
			return nil
		})
		if len(calls) != failures+1 {
			t.Fatalf("%d Publish calls, want %d", len(calls), failures+1)
		}
		if st.Retried != failures || st.Published != 1 || st.Abandoned != 0 {
			t.Errorf("Stats = %+v, want %d retries and the delta published", st, failures)
		}
		interval := 100 * time.Millisecond
		for i := 1; i < len(calls); i++ {
			wait := calls[i].Sub(calls[i-1])
			if lo, hi := interval/2, interval*3/2+time.Nanosecond; wait < lo || wait > hi {
				t.Errorf("wait %d = %v, want within ±50%% of %v", i, wait, interval)
			}
			if wait > maxWait {
				t.Errorf("wait %d = %v, longer than MaxRetryInterval %v", i, wait, maxWait)
			}
			interval = min(2*interval, maxWait)
		}
	})
}

// TestRetriesNeverGiveUp checks that a sink that is down for longer than
// any elapsed-time limit a backoff library might default to (backoff/v4
// stops after 15 minutes) is retried until it recovers, and nothing is
// lost.
func TestRetriesNeverGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const outage = 2 * time.Hour
		start := time.Now()
		calls, st := runBubbled(t, Options{MaxRetryInterval: time.Minute}, func(_ int, now time.Time) error {
			if now.Sub(start) < outage {
				return errDown
			}
			return nil
		})
		last := calls[len(calls)-1]
		if last.Sub(start) < outage {
			t.Errorf("published at %v, during the outage", last.Sub(start))
		}
		// Retries keep coming: the delta goes out within the longest wait
		// of the end of the outage.
		if late := last.Sub(start.Add(outage)); late > time.Minute {
			t.Errorf("published %v after the sink recovered, want within MaxRetryInterval", late)
		}
		if st.Abandoned != 0 || st.Published != 1 {
			t.Errorf("Stats = %+v, want the delta published and nothing abandoned", st)
		}
	})
}
