package kafka

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/kubebus/bridge/consumer"
)

// A state read while the bridge writes, then a Follow from its position,
// give every record exactly once: no gap, no overlap. Each key's records
// come in order, over several partitions.
func TestFollowAfterStateNoGap(t *testing.T) {
	e := newEnv(t, 3, nil)
	const keys, versions = 8, 25
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rv := 1; rv <= versions; rv++ {
			for i := range keys {
				e.put(fmt.Sprintf("cm-%d", i), rv)
			}
			if rv == 3 {
				close(started)
			}
		}
	}()
	<-started
	state, pos := e.readState()
	f := e.follow(pos)
	wg.Wait()
	recs := waitFor(t, f, "every record", func(r []consumer.Record) bool {
		return len(ids(state))+len(ids(r)) >= keys*versions
	})
	all := append(ids(state), ids(recs)...)
	if len(all) != keys*versions {
		t.Fatalf("state %d + follow %d records, want %d", len(ids(state)), len(ids(recs)), keys*versions)
	}
	seen := map[string]bool{}
	for _, id := range all {
		if seen[id] {
			t.Fatalf("record %s passed on twice", id)
		}
		seen[id] = true
	}
	last := map[string]int{}
	for _, r := range append(state, recs...) {
		if r.Message == nil {
			continue
		}
		rv, _ := strconv.Atoi(r.Message.ResourceVersion)
		if rv != last[r.Key]+1 {
			t.Fatalf("key %s: version %d after %d", r.Key, rv, last[r.Key])
		}
		last[r.Key] = rv
	}
	if len(ids(state)) == 0 || len(ids(recs)) == 0 {
		t.Logf("state %d, follow %d: the read did not overlap the writes", len(ids(state)), len(ids(recs)))
	}
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
}

// A Follow on an idle topic passes on progress records, each at the end
// offsets, with a time that moves on; a Follow from the last of them is
// not expired and resumes after it.
func TestFollowProgressWhileIdle(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.put("a", 1)
	_, pos := e.readState()
	f := e.follow(pos)
	recs := waitFor(t, f, "three progress records", func(r []consumer.Record) bool { return progressCount(r) >= 3 })
	var times []int64
	for _, r := range recs {
		if !r.Progress() || r.Message != nil || r.Err != nil {
			t.Fatalf("record on an idle topic: %+v", r)
		}
		p, err := parsePosition(r.Position)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := parsePosition(pos)
		if !slices.Equal(p.offsets, want.offsets) {
			t.Fatalf("progress at %v, want the end offsets %v", p.offsets, want.offsets)
		}
		times = append(times, p.time.UnixMilli())
	}
	if times[len(times)-1] <= times[0] {
		t.Fatalf("progress times do not move on: %v", times)
	}
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	f = e.follow(recs[len(recs)-1].Position)
	e.put("a", 2)
	recs = waitFor(t, f, "the next record", func(r []consumer.Record) bool { return len(ids(r)) > 0 })
	if got := ids(recs); !slices.Equal(got, []string{"uid-a-2"}) {
		t.Fatalf("after resuming: %v", got)
	}
}

// Tombstones come as records with the key and no message, in order with
// the key's other records.
func TestFollowTombstones(t *testing.T) {
	e := newEnv(t, 2, nil)
	_, pos := e.readState()
	f := e.follow(pos)
	e.put("a", 1)
	e.del("a")
	e.put("a", 2)
	recs := waitFor(t, f, "three records", func(r []consumer.Record) bool { return len(r)-progressCount(r) >= 3 })
	var got []string
	for _, r := range recs {
		switch {
		case r.Progress():
		case r.Err != nil:
			t.Fatalf("record %q: %v", r.Key, r.Err)
		case r.Message == nil:
			got = append(got, r.Key+" gone")
		default:
			got = append(got, r.Key+" "+r.Message.ResourceVersion)
		}
	}
	if want := []string{"default/a 1", "default/a gone", "default/a 2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// An empty topic gives a progress record at once and does not hang.
func TestFollowEmptyTopic(t *testing.T) {
	e := newEnv(t, 3, nil)
	_, pos := e.readState()
	f := e.follow(pos)
	waitFor(t, f, "a progress record", func(r []consumer.Record) bool { return progressCount(r) > 0 })
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
}

// Undecodable records are passed on with their error and do not stop the
// Follow.
func TestFollowUndecodable(t *testing.T) {
	e := newEnv(t, 1, nil)
	_, pos := e.readState()
	f := e.follow(pos)
	bad := record("default/bad", message("bad", 1))
	bad.Headers = nil
	e.send(bad)
	e.put("good", 1)
	recs := waitFor(t, f, "two records", func(r []consumer.Record) bool { return len(r)-progressCount(r) >= 2 })
	var real []consumer.Record
	for _, r := range recs {
		if !r.Progress() {
			real = append(real, r)
		}
	}
	if real[0].Key != "default/bad" || real[0].Err == nil || real[0].Message != nil {
		t.Fatalf("undecodable record: %+v", real[0])
	}
	if real[1].Message == nil || real[1].Message.ID != "uid-good-1" {
		t.Fatalf("record after it: %+v", real[1])
	}
}
