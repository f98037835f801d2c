package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/poll"
)

// intentBytes is an intent as every release has stored it: in the file
// (appendPosition), and as json.Marshal writes a Position in the NATS KV
// and Kafka stores.
const intentBytes = `{"uid":"u1","rv":""}`

// An intent is the same bytes in every store, as before it had a type: a
// Position marshalled with its uid and an empty resourceVersion.
func TestIntentBytes(t *testing.T) {
	rec := Intent{Resource: "configmaps", Key: "ns/a", UID: "u1"}.Record()
	if got := string(appendPosition(nil, rec.Position)); got != intentBytes {
		t.Errorf("file value of an intent = %s, want %s", got, intentBytes)
	}
	b, err := json.Marshal(rec.Position)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != intentBytes {
		t.Errorf("json of an intent = %s, want %s", b, intentBytes)
	}
	if rec.Deleted || rec.Resource != "configmaps" || rec.Key != "ns/a" || !rec.IsIntent() {
		t.Errorf("record of an intent = %+v", rec)
	}
}

// What the stores decode (DecodePosition) reads back as an intent when it
// is one, and as no intent when it holds a resourceVersion.
func TestDecodePositionIntent(t *testing.T) {
	for _, tc := range []struct {
		in     string
		intent bool
	}{
		{intentBytes, true},
		{`{"uid":"u1"}`, true}, // no "rv" at all: no resourceVersion either
		{`{"uid":"u1","rv":"5"}`, false},
	} {
		p, err := DecodePosition([]byte(tc.in))
		if err != nil {
			t.Fatalf("DecodePosition(%s): %v", tc.in, err)
		}
		if p.UID != "u1" || p.IsIntent() != tc.intent {
			t.Errorf("DecodePosition(%s) = %+v, IsIntent %v; want uid u1, IsIntent %v", tc.in, p, p.IsIntent(), tc.intent)
		}
	}
}

// An intent a file got from an earlier release, written as bytes into
// bbolt, loads as an intent: the type changed nothing on disk, and needs
// no migration.
func TestFileIntentWrittenBefore(t *testing.T) {
	f, path := openTemp(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	putRaw(t, path, "configmaps", map[string]string{"ns/new": intentBytes, "ns/old": `{"uid":"u2","rv":"7"}`})
	f = reopen(t, nil, path)
	snap := mustLoad(t, f, "configmaps")
	if p := snap.Objects["ns/new"]; p.UID != "u1" || !p.IsIntent() {
		t.Errorf("ns/new loads as %+v (intent %v), want the intent of u1", p, p.IsIntent())
	}
	if p := snap.Objects["ns/old"]; p.UID != "u2" || p.IsIntent() {
		t.Errorf("ns/old loads as %+v (intent %v), want u2 at 7, no intent", p, p.IsIntent())
	}
}

// RecordIntents returns once the intents are committed, without waiting
// for the interval; the acknowledged position recorded next replaces the
// intent; LastResourceVersion is not moved by an intent.
func TestWriterRecordIntents(t *testing.T) {
	f, _ := openTemp(t)
	w := NewWriter(f, 0, nil) // Run is never called: only RecordIntents flushes
	ctx := context.Background()
	w.Record(put("configmaps", "ns/old", "u0", "3"))
	if err := w.RecordIntents(ctx, Intent{Resource: "configmaps", Key: "ns/a", UID: "u1"}); err != nil {
		t.Fatalf("RecordIntents: %v", err)
	}
	assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{
		Objects:             map[string]Position{"ns/a": {UID: "u1"}, "ns/old": {UID: "u0", ResourceVersion: "3"}},
		LastResourceVersion: "3",
	})
	if !mustLoad(t, f, "configmaps").Objects["ns/a"].IsIntent() {
		t.Error("ns/a is not an intent once committed")
	}

	w.Record(put("configmaps", "ns/a", "u1", "9"))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if p := mustLoad(t, f, "configmaps").Objects["ns/a"]; p.IsIntent() || p.ResourceVersion != "9" {
		t.Errorf("ns/a = %+v after its acknowledged position, want u1 at 9", p)
	}
}

// A RecordIntents whose commit fails keeps the intents pending and
// returns the store's error; called again, it commits them.
func TestWriterRecordIntentsError(t *testing.T) {
	f, _ := openTemp(t)
	store := newFakeStore(f)
	store.failWith(errBoom)
	w := NewWriter(store, 0, nil)
	in := Intent{Resource: "configmaps", Key: "ns/a", UID: "u1"}
	if err := w.RecordIntents(context.Background(), in); !errors.Is(err, errBoom) {
		t.Fatalf("RecordIntents = %v, want %v", err, errBoom)
	}
	if p := w.Stats().Pending; p != 1 {
		t.Errorf("Pending = %d after a failed RecordIntents, want 1", p)
	}
	store.failWith(nil)
	if err := w.RecordIntents(context.Background(), in); err != nil {
		t.Fatalf("RecordIntents again: %v", err)
	}
	if p := mustLoad(t, f, "configmaps").Objects["ns/a"]; p != (Position{UID: "u1"}) {
		t.Errorf("ns/a = %+v, want the intent of u1", p)
	}
	if st := w.Stats(); st.Pending != 0 || st.Records != 1 {
		t.Errorf("Stats = %+v, want 1 record committed, none pending", st)
	}
}

// RecordIntents calls that wait while another's commit is in progress
// share one commit when it ends: the first of them commits the intents of
// all, and the others return once it has, without a commit of their own,
// even when records were made meanwhile.
func TestWriterRecordIntentsShareCommits(t *testing.T) {
	f, _ := openTemp(t)
	store := newFakeStore(f)
	started, release := make(chan struct{}), make(chan struct{})
	w := NewWriter(store, 0, nil)
	store.setHook(func(context.Context, []Record) error {
		close(started)
		<-release
		return nil
	})
	ctx := context.Background()
	errs := make(chan error, 4)
	intent := func(key string) Intent { return Intent{Resource: "configmaps", Key: key, UID: "u-" + key} }
	go func() { errs <- w.RecordIntents(ctx, intent("ns/a")) }()
	<-started
	// The second commit is the first waiting call's, of all three
	// waiting; a position is acknowledged while it is in progress.
	store.setHook(func(context.Context, []Record) error {
		store.setHook(nil)
		w.Record(put("configmaps", "ns/x", "u-x", "7"))
		return nil
	})
	for _, key := range []string{"ns/b", "ns/c", "ns/d"} {
		go func() { errs <- w.RecordIntents(ctx, intent(key)) }()
	}
	// ns/a in flight, the other three pending behind it.
	poll.Until(t, 5*time.Second, func() (bool, string) {
		p := w.Stats().Pending
		return p == 4, fmt.Sprintf("%d records pending", p)
	})
	close(release)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("RecordIntents: %v", err)
		}
	}
	if n := store.commitCalls(); n != 2 {
		t.Errorf("%d commits, want 2: ns/a's, then one for the three waiting", n)
	}
	if p := w.Stats().Pending; p != 1 {
		t.Errorf("%d records pending, want 1: ns/x, left for the next flush", p)
	}
	want := map[string]Position{}
	for _, key := range []string{"ns/a", "ns/b", "ns/c", "ns/d"} {
		want[key] = Position{UID: "u-" + key}
	}
	assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{Objects: want})
}
