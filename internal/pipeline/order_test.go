package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// flakySink fails whole batches and single messages at random, always
// retryably.
//
// When orderPreserving is set it behaves like a bus that keeps one key's
// messages in order (a Kafka partition, a JetStream subject with one
// publisher in flight): once a message fails, the later messages of its key
// in the batch fail too. Otherwise each message succeeds or fails on its
// own, as with independent asynchronous publishes.
func flakySink(seed uint64, orderPreserving bool) *sinktest.Recorder {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &sinktest.Recorder{Respond: func(_ context.Context, call int, msgs []*wire.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(10) == 0 {
			return errors.New("broker unavailable")
		}
		errs := make([]error, len(msgs))
		failedKey := map[string]bool{}
		failed := false
		for i, m := range msgs {
			switch {
			case orderPreserving && failedKey[m.Subject]:
				errs[i] = fmt.Errorf("not attempted: an earlier message of %s failed", m.Subject)
			case rng.IntN(5) == 0:
				errs[i] = fmt.Errorf("nack for %s", m.ID)
				failedKey[m.Subject] = true
				failed = true
			}
		}
		if !failed {
			return nil
		}
		be := &sink.BatchError{Errors: errs}
		if call%2 == 0 {
			// Sinks may wrap their batch errors.
			return fmt.Errorf("flaky sink: %w", be)
		}
		return be
	}}
}

// TestPerObjectOrder sends many changes of many objects through a sink
// that fails often and checks what the sink and the checkpoint saw.
//
// The pipeline keeps order by resending, after a failed delta, every later
// delta of the same object. The stream a sink accepts for one object is
// therefore not free of repeats, but it is ordered in this sense: reading
// it and keeping only the last occurrence of each version gives the
// versions in increasing order, and it ends with the latest one. A
// consumer that applies every message it reads ends in the right state.
//
// For a sink that keeps a key's messages in order, the guarantee is
// stronger: each version is accepted exactly once, in order.
func TestPerObjectOrder(t *testing.T) {
	const (
		objects   = 200
		perObject = 50
		pushers   = 8
	)
	tests := []struct {
		name            string
		orderPreserving bool
	}{
		{"messages fail independently", false},
		{"sink keeps each key in order", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := flakySink(uint64(i+1), tt.orderPreserving)
			h := newHarness(t, s, Options{
				Workers:   4,
				BatchSize: 64,
				// No object ever has this many deltas waiting, so every
				// change is published: none is collapsed.
				MaxPendingPerObject: perObject + 1,
				NewBackOff:          func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
			}, nil)
			h.start(t)

			// rv of object o's step-th change; increasing for each object.
			rv := func(o, step int) int { return step*objects + o + 1 }
			name := func(o int) string { return "cm-" + strconv.Itoa(o) }

			// Several goroutines feed the pipeline at once, as informers
			// do, but each object only ever from one of them.
			var wg sync.WaitGroup
			for g := range pushers {
				wg.Go(func() {
					for step := range perObject {
						for o := g; o < objects; o += pushers {
							typ := source.Updated
							if step == 0 {
								typ = source.Added
							}
							h.p.OnDelta(mkDelta(typ, name(o), "uid-"+name(o), rv(o, step)))
						}
					}
				})
			}
			wg.Wait()
			h.drain(t)

			if p := s.Problems(); len(p) > 0 {
				t.Fatalf("the pipeline broke the sink contract:\n%v", p)
			}
			for o := range objects {
				want := make([]int, perObject)
				for step := range want {
					want[step] = rv(o, step)
				}
				got := rvs(acceptedOf(s, subject(name(o))))
				checkObjectStream(t, name(o), got, want, tt.orderPreserving)
				if t.Failed() {
					return // one object's story is enough
				}

				// The checkpoint takes a delta once, when it is accepted with
				// every earlier delta of its object: a resent copy is not
				// recorded again, so the records are each version once, in
				// order, whatever the sink does.
				if recs := h.rec.rvsOf(subject(name(o))); !slices.Equal(recs, want) {
					t.Fatalf("%s: records %v, want each version once in order", name(o), recs)
				}
			}
			if bad := h.rec.recordedUnacked(); len(bad) > 0 {
				t.Fatalf("recorded %d deltas the sink had not accepted, first %+v", len(bad), bad[0])
			}

			st := h.p.Stats()
			total := int64(objects * perObject)
			if st.Published != total || int64(h.rec.count()) != total {
				t.Errorf("Published = %d, records = %d, want both %d", st.Published, h.rec.count(), total)
			}
			acceptedN := int64(len(allAccepted(s)))
			if acceptedN < total || (tt.orderPreserving && acceptedN != total) {
				t.Errorf("the sink accepted %d messages for %d deltas", acceptedN, total)
			}
			if st.Retried == 0 {
				t.Errorf("Retried = 0: the sink's failures were never retried")
			}
			if st.Coalesced != 0 || st.Skipped != 0 || st.Abandoned != 0 || st.Pending != 0 {
				t.Errorf("Stats = %+v, want nothing coalesced, skipped, abandoned or pending", st)
			}
		})
	}
}

// checkObjectStream checks the versions a sink accepted for one object
// against the versions it was sent, oldest first.
func checkObjectStream(t *testing.T, name string, got, want []int, exact bool) {
	t.Helper()
	if exact {
		if !slices.Equal(got, want) {
			t.Errorf("%s: accepted %v, want %v", name, got, want)
		}
		return
	}
	// Every version is accepted at least once.
	seen := map[int]bool{}
	for _, v := range got {
		seen[v] = true
	}
	for _, v := range want {
		if !seen[v] {
			t.Errorf("%s: version %d never accepted; accepted %v", name, v, got)
			return
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%s: accepted versions that were never sent: %v", name, got)
	}
	// Keeping the last occurrence of each version leaves them in order.
	lastAt := map[int]int{}
	for i, v := range got {
		lastAt[v] = i
	}
	for i := 1; i < len(want); i++ {
		if lastAt[want[i-1]] > lastAt[want[i]] {
			t.Errorf("%s: version %d is last accepted after version %d: %v", name, want[i-1], want[i], got)
			return
		}
	}
	if got[len(got)-1] != want[len(want)-1] {
		t.Errorf("%s: stream ends with %d, want the latest version %d", name, got[len(got)-1], want[len(want)-1])
	}
}
