package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// busLimit is the largest message the sinks of these tests take.
const busLimit = 2048

// bigDelta is mkDelta with an object too large for busLimit.
func bigDelta(typ source.DeltaType, name, uid string, rv int) source.Delta {
	d := mkDelta(typ, name, uid, rv)
	d.Object.Object["data"] = map[string]any{"page": strings.Repeat("<", 2*busLimit)}
	return d
}

// limitedBus answers as a bus with a message size limit does: a message
// over busLimit, or one refused by refuse, fails with sink.TooLarge, and
// holds back the later messages of its key as sink.PublishInOrder does.
func limitedBus(refuse func(m *wire.Message) bool) func(ctx context.Context, _ int, msgs []*wire.Message) error {
	return func(ctx context.Context, _ int, msgs []*wire.Message) error {
		return sink.PublishInOrder(ctx, msgs, func(_ context.Context, round []*wire.Message) []error {
			errs := make([]error, len(round))
			for i, m := range round {
				if len(m.Data) > busLimit || (refuse != nil && refuse(m)) {
					errs[i] = fmt.Errorf("test sink: %w", sink.TooLarge(fmt.Errorf("%d bytes over the limit of %d", len(m.Data), busLimit)))
				}
			}
			return errs
		})
	}
}

// omissions counts what the pipeline tells its Observer.
type omissions struct {
	noObserver
	mu                sync.Mutex
	omitted, terminal []string
}

func (o *omissions) Omitted(d *source.Delta) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.omitted = append(o.omitted, d.Name+"@"+d.ResourceVersion)
}

func (o *omissions) Failed(d *source.Delta, terminal bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if terminal {
		o.terminal = append(o.terminal, d.Name+"@"+d.ResourceVersion)
	}
}

// A change too large for the bus is published in its place, in its
// object's order, as an event with only the object's identity, marked
// ContentOmitted, and checkpointed like any other; a delete too. Only
// when even that event is refused is the change skipped.
func TestTooLargeIsPublishedWithoutContent(t *testing.T) {
	a, b := subject("a"), subject("b")
	tests := []struct {
		name   string
		refuse func(m *wire.Message) bool
		// Versions of a the sink accepts, those accepted without content,
		// and those recorded.
		wantAccepted, wantOmitted, wantRecorded []int
		wantSkipped                             int64
	}{
		{
			name:         "update and delete too large",
			wantAccepted: []int{1, 2, 3, 4},
			wantOmitted:  []int{2, 4},
			wantRecorded: []int{1, 2, 3, 4},
		},
		{
			name: "identity-only event refused too",
			refuse: func(m *wire.Message) bool {
				return m.Subject == a && m.ResourceVersion == "2"
			},
			wantAccepted: []int{1, 3, 4},
			wantOmitted:  []int{4},
			wantRecorded: []int{1, 3, 4},
			wantSkipped:  1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &omissions{}
			s := &sinktest.Recorder{Respond: limitedBus(tt.refuse)}
			h := newHarness(t, s, Options{
				Observer:   obs,
				NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
			}, nil)
			// Queued before Run starts, so that they travel in one batch.
			h.p.OnDelta(mkDelta(source.Added, "a", "uid-a", 1))
			h.p.OnDelta(bigDelta(source.Updated, "a", "uid-a", 2))
			h.p.OnDelta(mkDelta(source.Updated, "a", "uid-a", 3))
			h.p.OnDelta(bigDelta(source.Deleted, "a", "uid-a", 4))
			h.p.OnDelta(mkDelta(source.Added, "b", "uid-b", 1))
			h.start(t)
			h.drain(t)

			var got, omitted []int
			for _, m := range acceptedOf(s, a) {
				got = append(got, m.RV)
			}
			for _, m := range s.AcceptedOf(a) {
				if m.ContentOmitted {
					omitted = append(omitted, mustAtoi(m.ResourceVersion))
					if strings.Contains(string(m.Data), "<<") || !strings.Contains(string(m.Data), `"uid":"uid-a"`) {
						t.Errorf("%s@%s without content carries %s", m.Subject, m.ResourceVersion, m.Data)
					}
				}
			}
			if !slices.Equal(got, tt.wantAccepted) {
				t.Errorf("sink accepted %v of a, want %v", got, tt.wantAccepted)
			}
			if !slices.Equal(omitted, tt.wantOmitted) {
				t.Errorf("accepted %v of a without content, want %v", omitted, tt.wantOmitted)
			}
			if got := h.rec.rvsOf(a); !slices.Equal(got, tt.wantRecorded) {
				t.Errorf("recorded %v of a, want %v", got, tt.wantRecorded)
			}
			if bad := h.rec.recordedUnacked(); len(bad) > 0 {
				t.Errorf("recorded deltas the sink did not accept: %+v", bad)
			}
			if got := h.rec.rvsOf(b); !slices.Equal(got, []int{1}) {
				t.Errorf("recorded %v of b, want [1]", got)
			}
			if p := s.Problems(); len(p) > 0 {
				t.Errorf("sink contract broken: %v", p)
			}

			st := h.p.Stats()
			wantOmitted := int64(len(tt.wantOmitted))
			if st.Omitted != wantOmitted || st.Skipped != tt.wantSkipped || st.Retried != 0 {
				t.Errorf("Stats = %+v, want Omitted %d, Skipped %d, Retried 0", st, wantOmitted, tt.wantSkipped)
			}
			if want := int64(len(tt.wantAccepted) + 1); st.Published != want {
				t.Errorf("Published = %d, want %d", st.Published, want)
			}
			obs.mu.Lock()
			if len(obs.omitted) != len(tt.wantOmitted) || int64(len(obs.terminal)) != tt.wantSkipped {
				t.Errorf("Observer told of omitted %v and skipped %v", obs.omitted, obs.terminal)
			}
			obs.mu.Unlock()

			logs := h.logs.String()
			if n := strings.Count(logs, "published without its content"); n != len(tt.wantOmitted) {
				t.Errorf("logged %d changes published without content, want %d:\n%s", n, len(tt.wantOmitted), logs)
			}
			if n := strings.Count(logs, "skipping delta"); int64(n) != tt.wantSkipped {
				t.Errorf("logged %d skips, want %d:\n%s", n, tt.wantSkipped, logs)
			}
		})
	}
}
