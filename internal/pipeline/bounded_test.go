package pipeline

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// blockPipeline occupies every worker of h with a Publish that waits for
// release, and every assembler with a batch waiting for a worker, one
// "blocker-i" object each: 2*workers blockers in all. It returns once all
// of them are taken. Nothing queued afterwards is taken until release is
// closed.
func blockPipeline(t *testing.T, h *harness, workers int) {
	t.Helper()
	for i := range workers {
		h.p.OnDelta(mkDelta(source.Added, "blocker-"+strconv.Itoa(i), "uid-blocker", 1))
		poll.Until(t, 10*time.Second, func() (bool, string) {
			return h.sink.Calls() == i+1, "waiting for " + "worker " + strconv.Itoa(i) + " to block in Publish"
		})
	}
	for i := workers; i < 2*workers; i++ {
		name := "blocker-" + strconv.Itoa(i)
		h.p.OnDelta(mkDelta(source.Added, name, "uid-blocker", 1))
		poll.Until(t, 10*time.Second, func() (bool, string) { return h.taken(name), "waiting for " + "an assembler to take " + name })
	}
}

// taken reports whether the deltas of object name are all taken into a
// batch.
func (h *harness) taken(name string) bool {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	o := h.p.objects[configmaps.Name()+"/"+subject(name)]
	return o != nil && len(o.pending) == 0 && o.taken == o.last
}

// gated answers every batch with nil once release is closed; until then
// it holds batches of blocker objects.
func gated(release <-chan struct{}) func(ctx context.Context, call int, msgs []*wire.Message) error {
	return func(ctx context.Context, _ int, msgs []*wire.Message) error {
		if strings.HasPrefix(msgs[0].Name, "blocker-") {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

// TestCoalescingBoundsMemory stalls the sink and pours many more changes
// per object into the pipeline than MaxPendingPerObject. The waiting
// deltas of each object stay within the bound, and once the sink recovers
// each object's stream ends with its latest state.
func TestCoalescingBoundsMemory(t *testing.T) {
	const (
		workers    = 4
		maxPending = 4
		objects    = 20
		updates    = 100
	)
	release := make(chan struct{})
	s := &sinktest.Recorder{Respond: gated(release)}
	h := newHarness(t, s, Options{Workers: workers, MaxPendingPerObject: maxPending}, nil)
	h.start(t)
	blockPipeline(t, h, workers)

	name := func(o int) string { return "cm-" + strconv.Itoa(o) }
	pendingOf := func(o int) int {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		if obj := h.p.objects[configmaps.Name()+"/"+subject(name(o))]; obj != nil {
			return len(obj.pending)
		}
		return 0
	}
	rv := 0
	latest := map[string]int{}
	pushed := 0
	push := func(delta source.Delta, o int) {
		h.p.OnDelta(delta)
		pushed++
		latest[subject(name(o))] = rv
		if n := pendingOf(o); n > maxPending {
			t.Fatalf("%s has %d deltas waiting, more than MaxPendingPerObject %d", name(o), n, maxPending)
		}
	}
	for step := range updates {
		for o := range objects {
			rv++
			typ := source.Updated
			if step == 0 {
				typ = source.Added
			}
			push(mkDelta(typ, name(o), "uid-"+name(o), rv), o)
		}
	}
	// One more object is deleted and created again while the sink is
	// stalled; its two lives must not be merged.
	reborn := objects
	for i := range 3 * maxPending {
		rv++
		typ := source.Updated
		switch {
		case i == 0:
			typ = source.Added
		case i == maxPending:
			typ = source.Deleted
		}
		uid := "uid-first"
		if i > maxPending {
			uid = "uid-second"
			if i == maxPending+1 {
				typ = source.Added
			}
		}
		push(mkDelta(typ, name(reborn), uid, rv), reborn)
	}

	st := h.p.Stats()
	if st.Published != 0 {
		t.Fatalf("Published = %d while every worker was blocked", st.Published)
	}
	if st.Coalesced == 0 {
		t.Fatalf("Coalesced = 0 after %d changes per object with MaxPendingPerObject %d", updates, maxPending)
	}
	if want := int64(objects + 1 + 2*workers); st.Pending != want {
		t.Errorf("Pending = %d objects, want %d", st.Pending, want)
	}

	close(release)
	h.drain(t)

	st = h.p.Stats()
	if got := st.Published - 2*workers + st.Coalesced; got != int64(pushed) {
		t.Errorf("published %d + coalesced %d = %d, want every one of the %d changes accounted for",
			st.Published-2*workers, st.Coalesced, got, pushed)
	}
	if st.Skipped != 0 || st.Abandoned != 0 || st.Pending != 0 {
		t.Errorf("Stats = %+v, want nothing skipped, abandoned or pending", st)
	}
	for o := range objects + 1 {
		got := acceptedOf(s, subject(name(o)))
		if len(got) == 0 || len(got) > maxPending {
			t.Fatalf("%s: %d messages published, want 1 to %d: %v", name(o), len(got), maxPending, got)
		}
		for i := 1; i < len(got); i++ {
			if got[i].RV <= got[i-1].RV {
				t.Fatalf("%s: published out of order: %v", name(o), got)
			}
		}
		if last := got[len(got)-1]; last.RV != latest[subject(name(o))] {
			t.Errorf("%s: last message has version %d, want the latest %d", name(o), last.RV, latest[subject(name(o))])
		}
		if o < objects && got[0].Action != string(source.Added) {
			t.Errorf("%s: first message is %q; the object's creation was collapsed away", name(o), got[0].Action)
		}
		if recs := h.rec.rvsOf(subject(name(o))); len(recs) != len(got) || recs[len(recs)-1] != latest[subject(name(o))] {
			t.Errorf("%s: recorded %v, want what was published, ending with %d", name(o), recs, latest[subject(name(o))])
		}
	}

	// The reborn object: its first life ends with a delete, and its
	// second begins with an add, in that order.
	got := acceptedOf(s, subject(name(reborn)))
	var lives []string
	for _, a := range got {
		lives = append(lives, a.UID+" "+a.Action)
	}
	if want := "uid-first deleted,uid-second added"; strings.Join(lives, ",") != want {
		t.Errorf("reborn object published %q, want %q", lives, want)
	}
}
