package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/shutdown"
	"github.com/kubebus/bridge/wire"
)

// Run's error after a stop holds every part's error that applies, and no
// other: deltas abandoned at the deadline are logged, not an error.
func TestStopError(t *testing.T) {
	errSrc := errors.New("source broke")
	errPipe := errors.New("pipeline broke")
	errStore := errors.New("store damaged")
	errFlush := errors.New("flush failed")
	abandoned := fmt.Errorf("pipeline: stopped with 3 %w", pipeline.ErrAbandoned)
	cases := []struct {
		name                string
		src, pipe, wr, fl   error
		broken, writerBroke bool
		want                []error
		wantText            string // what the error begins with
	}{
		{name: "clean"},
		{name: "deltas abandoned", pipe: abandoned},
		{name: "every part failed", src: errSrc, pipe: errPipe, fl: errFlush, want: []error{errSrc, errPipe, errFlush}},
		{name: "the source failed, deltas abandoned", src: errSrc, pipe: abandoned, want: []error{errSrc}},
		{name: "store damaged while running", wr: errStore, broken: true, writerBroke: true, src: errSrc,
			want: []error{errStore, errSrc}, wantText: "bridge: store damaged"},
		{name: "store damaged while draining", wr: errStore, writerBroke: true,
			want: []error{errStore}, wantText: "bridge: the checkpoint store was found damaged while draining; no final flush was made"},
		{name: "final flush failed", fl: errFlush, want: []error{errFlush}, wantText: "bridge: final checkpoint flush: flush failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := stopError(c.src, c.pipe, c.wr, c.fl, c.broken, c.writerBroke)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("stopError = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("stopError = nil, want %v", c.want)
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Errorf("stopError = %v, which does not wrap %v", err, w)
				}
			}
			if errors.Is(err, pipeline.ErrAbandoned) {
				t.Errorf("stopError = %v, which wraps ErrAbandoned", err)
			}
			if !strings.HasPrefix(err.Error(), c.wantText) {
				t.Errorf("stopError = %q, want it to begin with %q", err, c.wantText)
			}
		})
	}
}

// closing records, in order, what was closed, and the context the sink
// was closed with.
type closing struct {
	mu     sync.Mutex
	order  []string
	sinkCx context.Context
}

func (c *closing) closed(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = append(c.order, what)
}

// closeStore is a checkpoint store whose Close waits for unblock (nil:
// returns at once) and returns err.
type closeStore struct {
	checkpoint.Store
	c       *closing
	unblock chan struct{}
	err     error
}

func (s *closeStore) Close() error {
	if s.unblock != nil {
		<-s.unblock
	}
	s.c.closed("store")
	return s.err
}

// closeSink is a sink whose Close waits for its context and returns
// err, or returns err at once.
type closeSink struct {
	c    *closing
	wait bool
	err  error
}

func (s *closeSink) Publish(context.Context, []*wire.Message) error { return nil }

func (s *closeSink) Close(ctx context.Context) error {
	s.c.mu.Lock()
	s.c.sinkCx = ctx
	s.c.mu.Unlock()
	if s.wait {
		<-ctx.Done()
	}
	s.c.closed("sink")
	return s.err
}

// release closes the store, then what it was opened on, then the sink,
// all within the exit's share of the shutdown budget: a store that never
// closes and a sink that waits on its bus are given up at the exit's
// deadline. What fails is logged, naming the part and its error; it
// never holds the process past the budget.
func TestReleaseWithinTheBudget(t *testing.T) {
	cases := []struct {
		name      string
		storeErr  error
		sinkErr   error
		blocked   bool // the store's Close never returns; the sink's waits for its context
		wantLog   []string
		wantTaken time.Duration
	}{
		{name: "clean"},
		{name: "both fail", storeErr: errors.New("bbolt: close failed"), sinkErr: errors.New("nats sink: close: drain failed"),
			wantLog: []string{"checkpoint store did not close cleanly", "bbolt: close failed", "sink did not close cleanly", "nats sink: close: drain failed"}},
		{name: "both hang", blocked: true, sinkErr: errors.New("kafka sink: close: writes still in flight"),
			wantLog:   []string{"checkpoint store did not close cleanly", "not done in time", "kafka sink: close: writes still in flight"},
			wantTaken: 19 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				c := &closing{}
				st := &closeStore{Store: checkpoint.Discard(), c: c, err: tc.storeErr}
				if tc.blocked {
					st.unblock = make(chan struct{})
					defer close(st.unblock)
				}
				b := &Bridge{log: slog.New(slog.NewTextHandler(&logs, nil))}
				e := ends{
					store:        st,
					releaseStore: func() { c.closed("connection") },
					sink:         &closeSink{c: c, wait: tc.blocked, err: tc.sinkErr},
				}
				ctx, stop := context.WithCancel(t.Context())
				budget := shutdown.Watch(ctx, 20*time.Second)
				stop()
				synctest.Wait()

				b.release(ctx, budget, e)
				if took := time.Since(budget.Began()); took != tc.wantTaken {
					t.Errorf("release took %s, want %s", took, tc.wantTaken)
				}
				want := []string{"store", "connection", "sink"}
				synctest.Wait() // what was left running in the background
				c.mu.Lock()
				defer c.mu.Unlock()
				got := c.order
				if tc.blocked {
					// The store is given up; at its deadline the
					// connection's release is started and left to run
					// beside the sink's close: both happen, in no order.
					want = []string{"connection", "sink"}
					got = slices.Sorted(slices.Values(got))
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("closed %v, want %v", c.order, want)
				}
				if d, ok := c.sinkCx.Deadline(); !ok || !d.Equal(budget.Deadline(shutdown.Exit)) {
					t.Errorf("the sink's Close had deadline %v, %v; want the exit's, %v", d, ok, budget.Deadline(shutdown.Exit))
				}
				for _, w := range tc.wantLog {
					if !strings.Contains(logs.String(), w) {
						t.Errorf("no %q in the log:\n%s", w, logs.String())
					}
				}
				if len(tc.wantLog) == 0 && logs.Len() > 0 {
					t.Errorf("a clean release logged:\n%s", logs.String())
				}
			})
		})
	}
}

// What the store was opened on (releaseStore: the nats-kv checkpoint's own
// NATS connection, whose Close flushes with a 1-minute write timeout) is
// released within the exit's share of the budget too, like the store's
// own Close: release returns by the exit's deadline.
func TestReleaseBoundsTheStoresConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		c := &closing{}
		b := &Bridge{log: slog.New(slog.NewTextHandler(&logs, nil))}
		ctx, stop := context.WithCancel(t.Context())
		budget := shutdown.Watch(ctx, 20*time.Second)
		stop()
		synctest.Wait()
		unblock := make(chan struct{})
		defer close(unblock)
		e := ends{
			store:        &closeStore{Store: checkpoint.Discard(), c: c},
			releaseStore: func() { <-unblock }, // a connection whose Close hangs
			sink:         &closeSink{c: c},
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.release(ctx, budget, e)
		}()
		select {
		case <-done:
		case <-time.After(budget.Total()):
			t.Errorf("release still running at the budget's end (%s): releaseStore is not bounded by the exit's deadline", budget.Total())
		}
	})
}
