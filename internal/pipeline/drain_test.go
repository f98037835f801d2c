package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

func (h *harness) barriers() int {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return len(h.p.barriers)
}

// drainAsync calls Drain in a goroutine and waits until it has taken its
// snapshot of what is queued.
func drainAsync(t *testing.T, h *harness, ctx context.Context, want int) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- h.p.Drain(ctx) }()
	poll.Until(t, 10*time.Second, func() (bool, string) { return h.barriers() == want, "waiting for " + "Drain to start waiting" })
	return res
}

func TestDrainWithNothingQueued(t *testing.T) {
	h := newHarness(t, &sinktest.Recorder{}, Options{}, nil)
	// Nothing to wait for: Drain returns at once, even with its context
	// already over and the pipeline not running.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.p.Drain(ctx); err != nil {
		t.Errorf("Drain = %v, want nil", err)
	}
}

// TestDrainWaitsForWhatWasQueuedBefore checks that Drain returns once
// everything queued before the call is published, and does not wait for
// what came after.
func TestDrainWaitsForWhatWasQueuedBefore(t *testing.T) {
	releaseA := make(chan struct{})
	s := &sinktest.Recorder{Respond: func(ctx context.Context, _ int, msgs []*wire.Message) error {
		switch msgs[0].Name {
		case "a":
			<-releaseA
		case "late":
			// Never accepted while the pipeline runs.
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	h := newHarness(t, s, Options{Workers: 4}, nil)
	h.start(t)

	h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
	poll.Until(t, 10*time.Second, func() (bool, string) { return s.Calls() == 1, "waiting for " + "a's first delta to reach the sink" })
	h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2))
	h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 3))
	h.p.OnDelta(mkDelta(source.Added, "b", "uid-b", 1))

	first := drainAsync(t, h, context.Background(), 1)
	second := drainAsync(t, h, context.Background(), 2)

	// Queued after the Drain calls: neither waits for it, although it
	// never gets through.
	h.p.OnDelta(mkDelta(source.Added, "late", "uid-late", 1))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return s.InFlight(subject("late")), "waiting for " + "the late delta to reach the sink"
	})

	select {
	case err := <-first:
		t.Fatalf("Drain returned %v while a's first delta was still in the sink", err)
	default:
	}

	close(releaseA)
	for i, res := range []<-chan error{first, second} {
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("Drain %d = %v, want nil", i+1, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Drain %d did not return after the sink recovered", i+1)
		}
	}
	// When Drain returned, everything queued before it was accepted and
	// recorded.
	if got := rvs(acceptedOf(s, subject("a"))); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("a: accepted %v, want [1 2 3]", got)
	}
	if got := h.rec.rvsOf(subject("b")); !slices.Equal(got, []int{1}) {
		t.Errorf("b: recorded %v, want [1]", got)
	}
	if got := acceptedOf(s, subject("late")); len(got) != 0 {
		t.Errorf("late: accepted %v, want nothing", got)
	}
	if n := h.barriers(); n != 0 {
		t.Errorf("%d barriers left behind", n)
	}
}

// TestDrainGivesUp checks that Drain returns an error when its context
// ends first, and that the pipeline is none the worse for it.
func TestDrainGivesUp(t *testing.T) {
	tests := []struct {
		name    string
		running bool // whether Run is running; if not, nothing is ever published
		timeout bool // the context ends by a deadline rather than by cancel
		want    error
	}{
		{"cancelled while the sink is blocked", true, false, context.Canceled},
		{"deadline while the sink is blocked", true, true, context.DeadlineExceeded},
		{"cancelled while the pipeline is not running", false, false, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			s := &sinktest.Recorder{Respond: func(ctx context.Context, _ int, _ []*wire.Message) error {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}
			h := newHarness(t, s, Options{}, nil)
			h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
			h.p.OnDelta(mkDelta(source.Added, "b", "uid-b", 1))
			if tt.running {
				h.start(t)
				poll.Until(t, 10*time.Second, func() (bool, string) { return s.Calls() == 1, "waiting for " + "the sink to be called" })
			}

			var err error
			if tt.timeout {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				err = h.p.Drain(ctx)
				cancel()
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				res := drainAsync(t, h, ctx, 1)
				cancel()
				select {
				case err = <-res:
				case <-time.After(10 * time.Second):
					t.Fatal("Drain did not return after its context ended")
				}
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Drain = %v, want %v", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "pipeline: 2 objects") {
				t.Errorf("Drain = %q, want it to say how many objects were left", err)
			}
			if n := h.barriers(); n != 0 {
				t.Errorf("%d barriers left behind by an abandoned Drain", n)
			}
			if len(allAccepted(s)) != 0 {
				t.Errorf("the sink accepted %v while blocked", allAccepted(s))
			}

			// The pipeline carries on: once the sink recovers, a new Drain
			// succeeds.
			if !tt.running {
				h.start(t)
			}
			close(release)
			h.drain(t)
			if got := len(allAccepted(s)); got != 2 {
				t.Errorf("accepted %d deltas after recovery, want 2", got)
			}
		})
	}
}
