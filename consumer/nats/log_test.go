package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/test/poll"
)

// TestReadStateIsLatestOfEachObject reads a state larger than a batch:
// one record per object, its latest version, in stream order, deletes
// included; other clusters are not read. The position is the filter's
// last message.
func TestReadStateIsLatestOfEachObject(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	want := map[string]string{} // name -> rv
	var last uint64
	for i := range 300 {
		name := fmt.Sprintf("cm-%03d", i)
		last = e.publish(object{namespace: "a", name: name, uid: "u" + name, rv: "1"}, 0)
		want[name] = "1"
	}
	for i := range 100 {
		name := fmt.Sprintf("cm-%03d", i)
		action, ttl := "updated", time.Duration(0)
		if i%10 == 0 {
			action, ttl = "deleted", time.Hour
		}
		last = e.publish(object{namespace: "a", name: name, uid: "u" + name, rv: "2", action: action}, ttl)
		want[name] = "2/" + action
	}
	e.publish(object{cluster: "staging", namespace: "a", name: "other", uid: "x", rv: "9"}, 0)

	recs, pos := readState(t, e.newLog(consumer.Options{}))
	if len(recs) != len(want) {
		t.Fatalf("ReadState gave %d records, want %d", len(recs), len(want))
	}
	var prev uint64
	for _, r := range recs {
		if r.Err != nil || r.Message == nil {
			t.Fatalf("record %s: message %v, err %v", r.Key, r.Message, r.Err)
		}
		m := r.Message
		got := m.ResourceVersion
		if got == "2" {
			got += "/" + m.Action
		}
		if m.Cluster != "prod" || want[m.Name] != got {
			t.Errorf("record %s: cluster %s rv %s, want prod %s", r.Key, m.Cluster, got, want[m.Name])
		}
		seq := mustPos(t, r.Position).seq
		if seq <= prev {
			t.Errorf("record %s at sequence %d after %d: not in stream order", r.Key, seq, prev)
		}
		prev = seq
	}
	if p := mustPos(t, pos); p.seq != last {
		t.Errorf("position %s: sequence %d, want the filter's last, %d", pos, p.seq, last)
	}
}

// TestFollowFromReadStateHasNoGap publishes while the state is read, then
// follows from the state's position: every object ends at its last
// version, and Follow repeats nothing ReadState read.
func TestFollowFromReadStateHasNoGap(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	const objects = 100
	var mu sync.Mutex
	want := map[string]string{}
	for i := range objects {
		name := fmt.Sprintf("cm-%03d", i)
		e.publish(object{namespace: "a", name: name, uid: "u" + name, rv: "1"}, 0)
		want[name] = "1"
	}
	stop := make(chan struct{})
	published := make(chan struct{})
	go func() {
		defer close(published)
		for rv := 2; ; rv++ {
			for i := range objects {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("cm-%03d", (i*7+rv)%objects)
				e.publish(object{namespace: "a", name: name, uid: "u" + name, rv: fmt.Sprint(rv), action: "updated"}, 0)
				mu.Lock()
				want[name] = fmt.Sprint(rv)
				mu.Unlock()
			}
		}
	}()

	l := e.newLog(consumer.Options{})
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pos, err := l.ReadState(ctx, func(r consumer.Record) error {
		got[r.Message.Name] = r.Message.ResourceVersion
		time.Sleep(time.Millisecond) // a slow reader, so that publishes land during the read
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, l, pos)
	time.Sleep(100 * time.Millisecond) // publish on after the read, too
	close(stop)
	<-published
	from := mustPos(t, pos).seq
	equal := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return len(got) == len(want)
	}
	for !equal() {
		r := f.nextMessage(t)
		if seq := mustPos(t, r.Position).seq; seq <= from {
			t.Fatalf("Follow from sequence %d gave sequence %d again", from, seq)
		}
		got[r.Message.Name] = r.Message.ResourceVersion
	}
}

// TestEmptyFilterDoesNotHang reads an empty stream, a stream with only
// another cluster's messages, and a namespace with no messages: each
// ReadState returns at once with no records, and a Follow from its
// position reports progress, then the next message.
func TestEmptyFilterDoesNotHang(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	check := func(name string, l *Log, wantSeq uint64, next object) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			recs, pos := readState(t, l)
			if len(recs) != 0 {
				t.Fatalf("%d records, want none", len(recs))
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("ReadState took %s", d)
			}
			if p := mustPos(t, pos); p.seq != wantSeq {
				t.Errorf("position %s: sequence %d, want %d", pos, p.seq, wantSeq)
			}
			f := follow(t, l, pos)
			if r := f.next(t); !r.Progress() {
				t.Fatalf("first record %+v, want progress", r)
			}
			seq := e.publish(next, 0)
			r := f.nextMessage(t)
			if r.Message.Name != next.name || mustPos(t, r.Position).seq != seq {
				t.Errorf("record %s at %s, want %s at sequence %d", r.Key, r.Position, next.name, seq)
			}
		})
	}
	check("empty stream", e.newLog(consumer.Options{}), 0, object{namespace: "a", name: "first", uid: "1", rv: "1"})
	e.publish(object{cluster: "staging", namespace: "a", name: "x", uid: "2", rv: "2"}, 0)
	check("another cluster only", e.newLog(consumer.Options{Cluster: "dev"}), 2, object{cluster: "dev", namespace: "a", name: "d", uid: "3", rv: "3"})
	check("empty namespace", e.newLog(consumer.Options{Namespace: "b"}), 3, object{namespace: "b", name: "in-b", uid: "4", rv: "4"})
}

// TestDeleteMarkerIsRecordWithoutMessage runs a stream whose server writes
// a marker (Nats-Marker-Reason) when a subject's last message expires:
// Follow passes the marker as a record of the subject without a message.
func TestDeleteMarkerIsRecordWithoutMessage(t *testing.T) {
	e := newEnv(t, time.Hour, func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = time.Minute })
	e.publish(object{namespace: "a", name: "gone", uid: "u1", rv: "1"}, 0)
	recs, pos := readState(t, e.newLog(consumer.Options{}))
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	f := follow(t, e.newLog(consumer.Options{}), pos)
	e.publish(object{namespace: "a", name: "gone", uid: "u1", rv: "2", action: "deleted"}, time.Second)
	del := f.nextMessage(t)
	if del.Message == nil || del.Message.Action != "deleted" {
		t.Fatalf("first record %+v, want the delete", del)
	}
	marker := f.nextMessage(t)
	if marker.Message != nil || marker.Err != nil || marker.Key != recs[0].Key {
		t.Fatalf("record after the delete expired: key %q message %v err %v; want key %q without message or error",
			marker.Key, marker.Message, marker.Err, recs[0].Key)
	}
	if mustPos(t, marker.Position).seq <= mustPos(t, del.Position).seq {
		t.Errorf("marker at %s is not after the delete at %s", marker.Position, del.Position)
	}
}

// TestFollowFromBeforeExpiredDeleteIsExpired: once a delete's TTL can
// have passed since a position, a Follow from it returns ErrExpired; a
// Follow that kept running keeps fresh positions through its progress
// records, and those can still be followed.
func TestFollowFromBeforeExpiredDeleteIsExpired(t *testing.T) {
	e := newEnv(t, time.Second, nil)
	l := e.newLog(consumer.Options{})
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "1"}, 0)
	_, pos := readState(t, l)
	if err := followErr(l, pos); err != nil {
		t.Fatalf("Follow from a fresh position: %v", err)
	}
	f := follow(t, l, pos)
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "2", action: "deleted"}, time.Second)
	poll.Until(t, 15*time.Second, func() (bool, string) {
		s, err := e.js.Stream(context.Background(), "KUBE")
		return err == nil && s.CachedInfo().State.Msgs == 0, "the delete has not expired from the stream"
	})
	err := followErr(l, pos)
	if !errors.Is(err, consumer.ErrExpired) {
		t.Fatalf("Follow from before an expired delete: %v, want ErrExpired", err)
	}
	t.Logf("Follow from before the expired delete: %v", err)

	var latest consumer.Record
	for latest.Position == "" || time.Since(time.UnixMilli(mustPos(t, latest.Position).ms)) > 300*time.Millisecond {
		if r := f.next(t); r.Progress() {
			latest = r
		}
	}
	if err := followErr(l, latest.Position); err != nil {
		t.Errorf("Follow from the running Follow's latest progress %s: %v", latest.Position, err)
	}
}

// TestFollowThatFallsBehindIsExpired: a reader whose handler holds it
// longer than the delete grace gets ErrExpired at its next message, since
// a delete after its position may have expired meanwhile.
func TestFollowThatFallsBehindIsExpired(t *testing.T) {
	e := newEnv(t, time.Second, nil)
	l := e.newLog(consumer.Options{})
	_, pos := readState(t, l)
	e.publish(object{namespace: "a", name: "one", uid: "u1", rv: "1"}, 0)
	e.publish(object{namespace: "a", name: "two", uid: "u2", rv: "2"}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	err := l.Follow(ctx, pos, func(r consumer.Record) error {
		if !r.Progress() {
			n++
			time.Sleep(1200 * time.Millisecond)
		}
		return nil
	})
	if !errors.Is(err, consumer.ErrExpired) || n != 1 {
		t.Fatalf("Follow with a handler slower than the grace: %d records, %v; want 1 record, then ErrExpired", n, err)
	}
}

// TestRecreatedStreamIsExpired: a position of a deleted stream, or of
// one deleted and created again, is expired, also for a Follow that is
// running when it happens.
func TestRecreatedStreamIsExpired(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	l := e.newLog(consumer.Options{})
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "1"}, 0)
	_, pos := readState(t, l)
	f := follow(t, l, pos)
	if r := f.next(t); !r.Progress() {
		t.Fatalf("first record %+v, want progress", r)
	}
	if err := e.js.DeleteStream(context.Background(), "KUBE"); err != nil {
		t.Fatal(err)
	}
	if err := followErr(l, pos); !errors.Is(err, consumer.ErrExpired) {
		t.Errorf("Follow on a deleted stream: %v, want ErrExpired", err)
	}
	e.createStream(time.Hour, nil)
	for i := range 5 {
		e.publish(object{namespace: "a", name: fmt.Sprint("new-", i), uid: fmt.Sprint("n", i), rv: "1"}, 0)
	}
	err := followErr(l, pos)
	if !errors.Is(err, consumer.ErrExpired) {
		t.Errorf("Follow on a recreated stream: %v, want ErrExpired", err)
	}
	t.Logf("Follow on a recreated stream: %v", err)
	select {
	case err := <-f.done:
		if !errors.Is(err, consumer.ErrExpired) {
			t.Errorf("running Follow across the recreation ended with %v, want ErrExpired", err)
		}
		f.done <- nil
	case <-time.After(15 * time.Second):
		t.Error("running Follow did not end within 15s of the stream's recreation")
	}
}

// TestMalformedPositionIsExpired: what is not a position of this Log is
// answered with ErrExpired, without a consumer left behind.
func TestMalformedPositionIsExpired(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	l := e.newLog(consumer.Options{})
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "1"}, 0)
	_, pos := readState(t, l)
	_, otherPos := readState(t, e.newLog(consumer.Options{Namespace: "a"}))
	p := mustPos(t, pos)
	with := func(f func(*position)) string { q := p; f(&q); return q.String() }
	for _, tc := range []struct{ name, pos string }{
		{"empty", ""},
		{"an API server's resourceVersion", "12345"},
		{"another bus", "k1.abc.1.2.3"},
		{"too few parts", "n1.00000000.1.1"},
		{"not numbers", strings.Replace(pos, "."+fmt.Sprint(p.seq)+".", ".x.", 1)},
		{"another Log's filter", otherPos},
		{"past the last sequence", with(func(q *position) { q.seq += 1000 })},
		{"another stream's creation", with(func(q *position) { q.created++ })},
		{"time far ahead of the server", with(func(q *position) { q.ms += time.Hour.Milliseconds() })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := followErr(l, tc.pos); !errors.Is(err, consumer.ErrExpired) {
				t.Errorf("Follow(%q): %v, want ErrExpired", tc.pos, err)
			}
		})
	}
	s, err := e.js.Stream(context.Background(), "KUBE")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 0 {
		t.Errorf("%d consumers left on the stream", n)
	}
}

// TestNamespaceAndLongTokens narrows a Log to a namespace of a cluster
// whose name, like an object's, is too long for a whole token: it reads
// exactly those objects, whole names included.
func TestNamespaceAndLongTokens(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	cluster := strings.Repeat("c", 300)
	long := strings.Repeat("part.", 120) + "end"
	e.publish(object{cluster: cluster, namespace: "a", name: long, uid: "u1", rv: "1"}, 0)
	e.publish(object{cluster: cluster, namespace: "a", name: "short", uid: "u2", rv: "2"}, 0)
	e.publish(object{cluster: cluster, namespace: "b", name: "in-b", uid: "u3", rv: "3"}, 0)
	e.publish(object{cluster: strings.Repeat("c", 299), namespace: "a", name: "near", uid: "u4", rv: "4"}, 0)
	e.publish(object{namespace: "a", name: "prod", uid: "u5", rv: "5"}, 0)

	l := e.newLog(consumer.Options{Cluster: cluster, Namespace: "a"})
	recs, pos := readState(t, l)
	var names []string
	for _, r := range recs {
		names = append(names, r.Message.Name)
		if len(r.Key) > 1024 {
			t.Errorf("subject of %d bytes", len(r.Key))
		}
	}
	if len(names) != 2 || names[0] != long || names[1] != "short" {
		t.Fatalf("names %.40q, want the long name and short", names)
	}
	f := follow(t, l, pos)
	e.publish(object{cluster: cluster, namespace: "b", name: "later-b", uid: "u6", rv: "6"}, 0)
	e.publish(object{cluster: cluster, namespace: "a", name: "later-a", uid: "u7", rv: "7"}, 0)
	if r := f.nextMessage(t); r.Message.Name != "later-a" {
		t.Errorf("Follow gave %s/%s, want a/later-a", r.Message.Namespace, r.Message.Name)
	}
}

// TestProgressWhileIdle: an idle Follow reports progress over and over,
// at its last message's sequence with a later time each time, and after
// a new message at that message's sequence.
func TestProgressWhileIdle(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	l := e.newLog(consumer.Options{})
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "1"}, 0)
	_, pos := readState(t, l)
	start := mustPos(t, pos)
	f := follow(t, l, pos)
	var times []int64
	for len(times) < 4 {
		r := f.next(t)
		p := mustPos(t, r.Position)
		if !r.Progress() || p.seq != start.seq {
			t.Fatalf("record %+v while idle, want progress at sequence %d", r, start.seq)
		}
		times = append(times, p.ms)
	}
	for i := 1; i < len(times); i++ {
		if times[i] < times[i-1] {
			t.Errorf("progress times go back: %v", times)
		}
	}
	if times[3] <= times[0] {
		t.Errorf("progress times do not advance: %v", times)
	}
	seq := e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "2", action: "updated"}, 0)
	if r := f.nextMessage(t); mustPos(t, r.Position).seq != seq {
		t.Fatalf("record at %s, want sequence %d", r.Position, seq)
	}
	if r := f.next(t); !r.Progress() || mustPos(t, r.Position).seq != seq {
		t.Errorf("after the message: %+v, want progress at sequence %d", r, seq)
	}
}

// TestReadersDeleteTheirConsumers: a ReadState and a Follow leave no
// consumer on the stream once they return.
func TestReadersDeleteTheirConsumers(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	l := e.newLog(consumer.Options{})
	for i := range 50 {
		e.publish(object{namespace: "a", name: fmt.Sprint("cm-", i), uid: fmt.Sprint(i), rv: "1"}, 0)
	}
	_, pos := readState(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Follow(ctx, pos, func(consumer.Record) error { return nil }) }()
	consumers := func() int {
		s, err := e.js.Stream(context.Background(), "KUBE")
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.Consumers
	}
	poll.Until(t, 15*time.Second, func() (bool, string) { return consumers() == 1, "no Follow's consumer" })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow after cancel: %v", err)
	}
	if n := consumers(); n != 0 {
		t.Errorf("%d consumers left once ReadState and Follow returned", n)
	}
}
