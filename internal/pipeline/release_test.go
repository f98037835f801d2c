package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// byteWitness checks, on every Publish, that each message's bytes are
// those it had when a sink first got it: a message sent again after a
// failure was not given back to the pool meanwhile (released buffers are
// poisoned in these tests, see TestMain, and reused by later events). It
// keeps every message it saw, to tell afterwards which were released.
type byteWitness struct {
	mu       sync.Mutex
	first    map[*wire.Message][]byte
	order    []*wire.Message
	problems []string
}

func (w *byteWitness) see(call int, msgs []*wire.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first == nil {
		w.first = map[*wire.Message][]byte{}
	}
	for _, m := range msgs {
		ev, _ := m.MarshalJSON()
		prev, ok := w.first[m]
		switch {
		case len(m.Encoded) == 0 || !json.Valid(m.Encoded):
			w.problems = append(w.problems, fmt.Sprintf("call %d: %s@%s has no bytes: released before it was sent", call, m.Name, m.ResourceVersion))
		case !ok:
			w.first[m] = bytes.Clone(ev)
			w.order = append(w.order, m)
		case !bytes.Equal(prev, ev):
			w.problems = append(w.problems, fmt.Sprintf("call %d: %s@%s changed since it was first sent:\n got %.200q\nwant %.200q", call, m.Name, m.ResourceVersion, ev, prev))
		}
	}
}

// released returns the messages seen whose bytes were given back (Release
// poisons them, and a later event may have taken the buffer since), and
// those still holding theirs. Call it once the pipeline stopped.
func (w *byteWitness) released() (released, held []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.order {
		id := fmt.Sprintf("%s@%s", m.Name, m.ResourceVersion)
		if m.ContentOmitted {
			id += " without content"
		}
		if ev, _ := m.MarshalJSON(); !bytes.Equal(ev, w.first[m]) {
			released = append(released, id)
		} else {
			held = append(held, id)
		}
	}
	slices.Sort(released)
	slices.Sort(held)
	return released, held
}

// Every message's bytes go back to the pool once the pipeline is done
// with it, whatever its outcome: accepted, accepted after a retry, sent
// again behind an earlier failure of its object, replaced by the event
// without its content, skipped for good. A message sent again is never
// given back before (its bytes are the same on every attempt), none
// twice (Release panics), none is left.
func TestBuffersGoBackOnceDone(t *testing.T) {
	w := &byteWitness{}
	var mu sync.Mutex
	failedOnce := map[string]bool{}
	s := &sinktest.Recorder{Respond: func(ctx context.Context, call int, msgs []*wire.Message) error {
		w.see(call, msgs)
		return sink.PublishInOrder(ctx, msgs, func(_ context.Context, round []*wire.Message) []error {
			mu.Lock()
			defer mu.Unlock()
			errs := make([]error, len(round))
			for i, m := range round {
				switch {
				case m.Name == "big" && !m.ContentOmitted:
					errs[i] = sink.TooLarge(errors.New("test sink: too large"))
				case m.Name == "bad":
					errs[i] = sink.Terminal(errors.New("test sink: refused for good"))
				case (m.Name == "retried" || m.Name == "held" && m.ResourceVersion == "1") && !failedOnce[m.ID]:
					failedOnce[m.ID] = true
					errs[i] = errors.New("test sink: try again")
				}
			}
			return errs
		})
	}}
	h := newHarness(t, s, Options{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }}, nil)
	h.start(t)
	for _, d := range []source.Delta{
		mkDelta(source.Added, "accepted", "uid-accepted", 1),
		mkDelta(source.Updated, "retried", "uid-retried", 1),
		mkDelta(source.Updated, "held", "uid-held", 1),
		mkDelta(source.Updated, "held", "uid-held", 2),
		mkDelta(source.Updated, "big", "uid-big", 1),
		mkDelta(source.Deleted, "bad", "uid-bad", 1),
	} {
		h.p.OnDelta(d)
	}
	h.drain(t)
	h.stop(t)

	for _, p := range append(w.problems, s.Problems()...) {
		t.Error(p)
	}
	released, held := w.released()
	want := []string{"accepted@1", "bad@1", "big@1", "big@1 without content", "held@1", "held@2", "retried@1"}
	if !slices.Equal(released, want) || len(held) > 0 {
		t.Errorf("released %q, still held %q; want every message released: %q", released, held, want)
	}
	if got := acceptedList(s.Accepted()); len(got) != 5 {
		t.Errorf("accepted %v, want accepted@1, retried@1, held@1, held@2 and big@1 without content", got)
	}
}

// The bytes of a Publish cut short by the end of the pipeline's context
// are not given back to the pool: the sink's client may still send them.
// They stay the event's, for the garbage collector to take.
func TestBuffersOfACutPublishAreNotReused(t *testing.T) {
	w := &byteWitness{}
	s := &sinktest.Recorder{Respond: func(ctx context.Context, call int, msgs []*wire.Message) error {
		w.see(call, msgs)
		<-ctx.Done()
		return ctx.Err()
	}}
	h := newHarness(t, s, Options{}, nil)
	h.start(t)
	h.p.OnDelta(mkDelta(source.Added, "cut", "uid-cut", 1))
	poll.Until(t, 10*time.Second, func() (bool, string) { return s.InFlight(subject("cut")), "the sink never got the message" })
	if err := h.stopErr(t); !errors.Is(err, ErrAbandoned) {
		t.Errorf("Run = %v, want ErrAbandoned", err)
	}
	released, held := w.released()
	if len(released) > 0 || !slices.Equal(held, []string{"cut@1"}) {
		t.Fatalf("released %q, held %q; want cut@1 held", released, held)
	}
	w.see(2, w.order) // its bytes are still those it was sent with
	for _, p := range w.problems {
		t.Error(p)
	}
}
