package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

var errDown = errors.New("broker down")

// TestRunStopsWhileTheSinkFails checks the hard stop: Run returns soon
// after its context ends however the sink misbehaves, and counts what it
// left unpublished, none of which reached the checkpoint, in its error.
func TestRunStopsWhileTheSinkFails(t *testing.T) {
	const objects, perObject = 10, 3
	failing := func(string) bool { return true }
	tests := []struct {
		name    string
		opts    Options
		fails   func(name string) bool // objects the sink never accepts
		respond func(ctx context.Context, msgs []*wire.Message, fails func(string) bool) error
		// started tells when the pipeline is in the state the case is
		// about, so that cancelling then tests it.
		started       func(h *harness) bool
		wantAbandoned int64
	}{
		{
			name: "waiting out a long backoff",
			opts: Options{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }},
			respond: func(context.Context, []*wire.Message, func(string) bool) error {
				return errDown
			},
			fails:         failing,
			started:       func(h *harness) bool { return h.p.Stats().Retried > 0 },
			wantAbandoned: objects * perObject,
		},
		{
			name: "default backoff",
			opts: Options{MaxRetryInterval: time.Hour},
			respond: func(_ context.Context, msgs []*wire.Message, _ func(string) bool) error {
				errs := make([]error, len(msgs))
				for i := range errs {
					errs[i] = errDown
				}
				return &sink.BatchError{Errors: errs}
			},
			fails:         failing,
			started:       func(h *harness) bool { return h.p.Stats().Retried > 0 },
			wantAbandoned: objects * perObject,
		},
		{
			name: "Publish blocked until its context ends",
			respond: func(ctx context.Context, _ []*wire.Message, _ func(string) bool) error {
				<-ctx.Done()
				return ctx.Err()
			},
			fails:         failing,
			started:       func(h *harness) bool { return h.sink.Calls() > 0 },
			wantAbandoned: objects * perObject,
		},
		{
			name: "one object failing, the others published",
			opts: Options{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }},
			respond: func(_ context.Context, msgs []*wire.Message, fails func(string) bool) error {
				return perMessage(msgs, func(m *wire.Message) error {
					if fails(m.Name) {
						return errDown
					}
					return nil
				})
			},
			fails: func(name string) bool { return name == "cm-3" },
			started: func(h *harness) bool {
				return h.p.Stats().Published == (objects-1)*perObject && h.p.Stats().Retried > 0
			},
			wantAbandoned: perObject,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sinktest.Recorder{}
			s.Respond = func(ctx context.Context, _ int, msgs []*wire.Message) error {
				return tt.respond(ctx, msgs, tt.fails)
			}
			h := newHarness(t, s, tt.opts, nil)
			for step := range perObject {
				for o := range objects {
					h.p.OnDelta(mkDelta(source.Updated, "cm-"+strconv.Itoa(o), "uid", step+1))
				}
			}
			h.start(t)
			poll.Until(t, 10*time.Second, func() (bool, string) { return tt.started(h), "waiting for " + "the pipeline to be stuck" })

			runErr := h.stopErr(t) // fails the test unless Run returns within 10s

			st := h.p.Stats()
			if st.Abandoned != tt.wantAbandoned {
				t.Errorf("Abandoned = %d, want %d", st.Abandoned, tt.wantAbandoned)
			}
			wantPublished := objects*perObject - tt.wantAbandoned
			if st.Published != wantPublished {
				t.Errorf("Published = %d, want %d", st.Published, wantPublished)
			}
			if st.Pending != 0 {
				t.Errorf("Pending = %d after Run returned", st.Pending)
			}
			for o := range objects {
				name := "cm-" + strconv.Itoa(o)
				recs := h.rec.rvsOf(subject(name))
				if tt.fails(name) && len(recs) > 0 {
					t.Errorf("%s was never accepted but recorded %v", name, recs)
				}
				if !tt.fails(name) && len(recs) != perObject {
					t.Errorf("%s was accepted but recorded %v", name, recs)
				}
			}
			if bad := h.rec.recordedUnacked(); len(bad) > 0 {
				t.Errorf("recorded deltas the sink did not accept: %+v", bad)
			}
			if want := " " + strconv.FormatInt(tt.wantAbandoned, 10) + " deltas abandoned"; !errors.Is(runErr, ErrAbandoned) || !strings.Contains(fmt.Sprint(runErr), want) {
				t.Errorf("Run = %v, want an error wrapping ErrAbandoned that says %q", runErr, want)
			}
		})
	}
}

// TestRunIdle checks that Run with nothing to do returns as soon as its
// context ends, with no error: nothing was abandoned.
func TestRunIdle(t *testing.T) {
	h := newHarness(t, &sinktest.Recorder{}, Options{}, nil)
	h.start(t)
	h.stop(t) // fails the test unless Run returns nil within 10s
	if st := h.p.Stats(); st != (Stats{}) {
		t.Errorf("Stats = %+v, want zero", st)
	}
}
