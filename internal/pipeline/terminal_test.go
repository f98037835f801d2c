package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

var errRefused = errors.New("refused for good")

// perMessage answers a batch message by message with verdict.
func perMessage(msgs []*wire.Message, verdict func(m *wire.Message) error) error {
	errs := make([]error, len(msgs))
	failed := false
	for i, m := range msgs {
		errs[i] = verdict(m)
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil
	}
	return &sink.BatchError{Errors: errs}
}

func hasRV(msgs []*wire.Message, subject string, rv int) bool {
	return slices.ContainsFunc(msgs, func(m *wire.Message) bool {
		return m.Subject == subject && m.ResourceVersion == fmt.Sprint(rv)
	})
}

// TestTerminalFailuresAreSkipped checks that a delta the sink can never
// take is skipped, counted and left out of the checkpoint, and that the
// object's other deltas, and other objects, still flow.
func TestTerminalFailuresAreSkipped(t *testing.T) {
	a, b := subject("a"), subject("b")
	tests := []struct {
		name    string
		respond func(ctx context.Context, call int, msgs []*wire.Message) error
		enc     Encoder
		// Versions of object a the sink accepts, and the pipeline
		// records, from deltas 1, 2, 3 (sent together) and then 4.
		wantAccepted []int
		wantRecorded []int
		wantSkipped  int64
		wantRetried  int64
		wantLogged   []int // versions of a whose skip is logged
	}{
		{
			name: "one message terminal",
			respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
				return perMessage(msgs, func(m *wire.Message) error {
					if m.Subject == a && m.ResourceVersion == "2" {
						return sink.Terminal(errRefused)
					}
					return nil
				})
			},
			wantAccepted: []int{1, 3, 4},
			wantRecorded: []int{1, 3, 4},
			wantSkipped:  1,
			wantLogged:   []int{2},
		},
		{
			name: "terminal wrapped by the sink",
			respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
				return perMessage(msgs, func(m *wire.Message) error {
					if m.Subject == a && m.ResourceVersion == "2" {
						return fmt.Errorf("kafka sink: %w", sink.Terminal(errRefused))
					}
					return nil
				})
			},
			wantAccepted: []int{1, 3, 4},
			wantRecorded: []int{1, 3, 4},
			wantSkipped:  1,
			wantLogged:   []int{2},
		},
		{
			// Delta 1 fails once, retryably, so 2 and 3 are sent again
			// behind it although 3 was accepted; on the retry 2 is
			// skipped and 3 accepted again.
			name: "terminal behind a retryable failure",
			respond: func(_ context.Context, call int, msgs []*wire.Message) error {
				return perMessage(msgs, func(m *wire.Message) error {
					switch {
					case m.Subject == a && m.ResourceVersion == "1" && call == 1:
						return errors.New("timeout")
					case m.Subject == a && m.ResourceVersion == "2":
						return sink.Terminal(errRefused)
					}
					return nil
				})
			},
			wantAccepted: []int{3, 1, 3, 4},
			wantRecorded: []int{1, 3, 4},
			wantSkipped:  1,
			wantRetried:  3,
			wantLogged:   []int{2},
		},
		{
			name: "whole batch terminal",
			respond: func(_ context.Context, _ int, msgs []*wire.Message) error {
				if hasRV(msgs, a, 2) {
					return fmt.Errorf("nats sink: %w", sink.Terminal(errors.New("stream sealed")))
				}
				return nil
			},
			// 1, 2 and 3 of a and 1 of b are in the same batch.
			wantAccepted: []int{4},
			wantRecorded: []int{4},
			wantSkipped:  4,
			wantLogged:   []int{1, 2, 3},
		},
		{
			name: "delta that cannot be encoded",
			enc: encodeFunc(func(d *source.Delta) (*wire.Message, error) {
				if d.Name == "a" && d.ResourceVersion == "2" {
					d = &source.Delta{}
					*d = mkDelta(source.Updated, "a", "uid-a", 2)
					d.Object.Object["bad"] = math.NaN()
				}
				return event.Encoder{Cluster: "test"}.Encode(d)
			}),
			wantAccepted: []int{1, 3, 4},
			wantRecorded: []int{1, 3, 4},
			wantSkipped:  1,
			wantLogged:   []int{2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sinktest.Recorder{Respond: tt.respond}
			h := newHarness(t, s, Options{
				Workers:    2,
				NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
			}, tt.enc)
			// Queued before Run starts, so that they travel in one batch.
			h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
			h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 2))
			h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 3))
			h.p.OnDelta(mkDelta(source.Added, "b", "uid-b", 1))
			h.start(t)
			h.drain(t)
			h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 4))
			h.drain(t)

			if got := rvs(acceptedOf(s, a)); !slices.Equal(got, tt.wantAccepted) {
				t.Errorf("sink accepted %v of a, want %v", got, tt.wantAccepted)
			}
			if got := h.rec.rvsOf(a); !slices.Equal(got, tt.wantRecorded) {
				t.Errorf("recorded %v of a, want %v", got, tt.wantRecorded)
			}
			if bad := h.rec.recordedUnacked(); len(bad) > 0 {
				t.Errorf("recorded deltas the sink did not accept: %+v", bad)
			}
			wantB := []int{1}
			if tt.wantSkipped == 4 {
				wantB = nil // b was in the batch that failed as a whole
			}
			if got := h.rec.rvsOf(b); !slices.Equal(got, wantB) {
				t.Errorf("recorded %v of b, want %v", got, wantB)
			}

			st := h.p.Stats()
			if st.Skipped != tt.wantSkipped {
				t.Errorf("Skipped = %d, want %d", st.Skipped, tt.wantSkipped)
			}
			if st.Retried != tt.wantRetried {
				t.Errorf("Retried = %d, want %d", st.Retried, tt.wantRetried)
			}
			if want := int64(5) - tt.wantSkipped; st.Published != want {
				t.Errorf("Published = %d, want %d", st.Published, want)
			}
			if st.Abandoned != 0 || st.Pending != 0 {
				t.Errorf("Stats = %+v, want nothing abandoned or pending", st)
			}

			// Each skip is logged with the object's identity.
			logs := h.logs.String()
			if n := strings.Count(logs, "skipping delta"); int64(n) != tt.wantSkipped {
				t.Errorf("logged %d skips, want %d:\n%s", n, tt.wantSkipped, logs)
			}
			for _, rv := range tt.wantLogged {
				want := fmt.Sprintf("name=a uid=uid-a resourceVersion=%d", rv)
				if !strings.Contains(logs, want) {
					t.Errorf("no skip logged with %q:\n%s", want, logs)
				}
			}
		})
	}
}
