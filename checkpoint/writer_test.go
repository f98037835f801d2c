package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/test/poll"
)

var errBoom = errors.New("checkpoint: boom")

// fakeStore wraps a Store, records every successful Commit and can be made
// to fail or stall through hook.
type fakeStore struct {
	Store

	mu      sync.Mutex
	commits [][]Record
	calls   int
	hook    func(ctx context.Context, recs []Record) error
}

func newFakeStore(inner Store) *fakeStore { return &fakeStore{Store: inner} }

func (s *fakeStore) Commit(ctx context.Context, recs []Record) error {
	s.mu.Lock()
	s.calls++
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, recs); err != nil {
			return err
		}
	}
	if err := s.Store.Commit(ctx, recs); err != nil {
		return err
	}
	s.mu.Lock()
	s.commits = append(s.commits, slices.Clone(recs))
	s.mu.Unlock()
	return nil
}

func (s *fakeStore) setHook(h func(context.Context, []Record) error) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

func (s *fakeStore) failWith(err error) {
	s.setHook(func(context.Context, []Record) error { return err })
}

func (s *fakeStore) committed() [][]Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commits)
}

func (s *fakeStore) commitCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func TestWriterCoalesces(t *testing.T) {
	many := make([]Record, 1000)
	for i := range many {
		many[i] = put("configmaps", "ns/a", "ua", strconv.Itoa(i+1))
	}
	tests := []struct {
		name        string
		records     []Record
		wantPending int
		wantCommit  []Record
	}{
		{
			name:        "many records for one key",
			records:     many,
			wantPending: 1,
			wantCommit:  []Record{put("configmaps", "ns/a", "ua", "1000")},
		},
		{
			name:        "delete replaces update",
			records:     []Record{put("configmaps", "ns/a", "ua", "1"), del("configmaps", "ns/a", "ua", "2")},
			wantPending: 1,
			wantCommit:  []Record{del("configmaps", "ns/a", "ua", "2")},
		},
		{
			name: "keys and resources are distinct, order of last write kept",
			records: []Record{
				put("configmaps", "ns/a", "u1", "1"),
				put("secrets", "ns/a", "u2", "2"),
				put("configmaps", "ns/b", "u3", "3"),
				put("configmaps", "ns/a", "u1", "4"),
			},
			wantPending: 3,
			wantCommit: []Record{
				put("secrets", "ns/a", "u2", "2"),
				put("configmaps", "ns/b", "u3", "3"),
				put("configmaps", "ns/a", "u1", "4"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newFakeStore(Discard())
			w := NewWriter(store, time.Hour, nil)
			// Half in one call, the rest one by one.
			w.Record(tt.records[:len(tt.records)/2]...)
			for _, r := range tt.records[len(tt.records)/2:] {
				w.Record(r)
			}
			if got := w.Stats().Pending; got != tt.wantPending {
				t.Errorf("Pending = %d, want %d", got, tt.wantPending)
			}
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := store.committed(); !reflect.DeepEqual(got, [][]Record{tt.wantCommit}) {
				t.Errorf("commits = %+v, want %+v", got, [][]Record{tt.wantCommit})
			}
			want := WriterStats{Flushes: 1, Records: uint64(tt.wantPending)}
			if got := w.Stats(); got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
		})
	}
}

func TestWriterFlushNothingPending(t *testing.T) {
	store := newFakeStore(Discard())
	w := NewWriter(store, time.Hour, nil)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := store.commitCalls(); n != 0 {
		t.Errorf("Commit called %d times, want 0", n)
	}
	if got := w.Stats(); got != (WriterStats{}) {
		t.Errorf("Stats = %+v, want zero", got)
	}
}

func TestWriterDropsInvalid(t *testing.T) {
	store := newFakeStore(Discard())
	w := NewWriter(store, time.Hour, nil)
	w.Record(put("", "ns/a", "u", "1"), put("configmaps", "", "u", "2"), put("configmaps", "ns/a", "u", "3"))
	if got, want := w.Stats(), (WriterStats{Dropped: 2, Pending: 1}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestWriterNilStore(t *testing.T) {
	w := NewWriter(nil, 0, nil)
	w.Record(put("configmaps", "ns/a", "u", "1"))
	if err := w.Flush(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "checkpoint: ") {
		t.Errorf("Flush = %v, want a checkpoint error", err)
	}
	if got, want := w.Stats(), (WriterStats{Failures: 1, Pending: 1}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// A failed flush keeps its records pending; records made while it was in
// progress win over them, and the retry commits everything in the order it
// was recorded.
func TestWriterFlushErrorKeepsPending(t *testing.T) {
	f, _ := openTemp(t)
	store := newFakeStore(f)
	w := NewWriter(store, time.Hour, nil)

	w.Record(put("configmaps", "ns/a", "ua", "1"), put("configmaps", "ns/b", "ub", "2"))

	started, release := make(chan struct{}), make(chan struct{})
	store.setHook(func(context.Context, []Record) error {
		close(started)
		<-release
		return errBoom
	})
	flushErr := make(chan error, 1)
	go func() { flushErr <- w.Flush(context.Background()) }()
	<-started

	// Recorded while the failing flush is in progress.
	w.Record(put("configmaps", "ns/a", "ua", "3"), put("configmaps", "ns/c", "uc", "4"))
	if got := w.Stats().Pending; got != 4 { // a counted twice while in flight
		t.Errorf("Pending during flush = %d, want 4", got)
	}
	close(release)
	if err := <-flushErr; !errors.Is(err, errBoom) {
		t.Fatalf("Flush = %v, want %v", err, errBoom)
	}
	if got, want := w.Stats(), (WriterStats{Failures: 1, Pending: 3}); got != want {
		t.Errorf("Stats after failure = %+v, want %+v", got, want)
	}
	assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{})

	// A second failure changes nothing.
	store.failWith(errBoom)
	if err := w.Flush(context.Background()); !errors.Is(err, errBoom) {
		t.Fatalf("Flush = %v, want %v", err, errBoom)
	}

	store.setHook(nil)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatalf("retry Flush: %v", err)
	}
	wantCommit := []Record{
		put("configmaps", "ns/b", "ub", "2"),
		put("configmaps", "ns/a", "ua", "3"),
		put("configmaps", "ns/c", "uc", "4"),
	}
	if got := store.committed(); !reflect.DeepEqual(got, [][]Record{wantCommit}) {
		t.Errorf("commits = %+v, want %+v", got, [][]Record{wantCommit})
	}
	if got, want := w.Stats(), (WriterStats{Flushes: 1, Records: 3, Failures: 2}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{
		Objects: map[string]Position{
			"ns/a": {UID: "ua", ResourceVersion: "3"},
			"ns/b": {UID: "ub", ResourceVersion: "2"},
			"ns/c": {UID: "uc", ResourceVersion: "4"},
		},
		LastResourceVersion: "4",
	})
}

// TestWriterRunInterval uses a synctest bubble, whose clock only moves when
// every goroutine in it is blocked, to check exactly when Run flushes.
func TestWriterRunInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		store := newFakeStore(Discard())
		logs := &logtest.Buffer{}
		w := NewWriter(store, interval, slog.New(slog.NewTextHandler(logs, nil)))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()

		commits := func() int { synctest.Wait(); return len(store.committed()) }

		w.Record(put("configmaps", "ns/a", "ua", "1"))
		time.Sleep(interval - time.Nanosecond)
		if n := commits(); n != 0 {
			t.Fatalf("commits before the interval = %d, want 0", n)
		}
		time.Sleep(time.Nanosecond)
		if n := commits(); n != 1 {
			t.Fatalf("commits after one interval = %d, want 1", n)
		}

		// Nothing pending: a tick commits nothing.
		time.Sleep(interval)
		if n := commits(); n != 1 {
			t.Fatalf("commits after an idle interval = %d, want 1", n)
		}

		// A failed flush is logged and retried on the next tick.
		store.failWith(errBoom)
		w.Record(put("configmaps", "ns/b", "ub", "2"), put("", "bad", "", ""))
		time.Sleep(interval)
		synctest.Wait()
		if got, want := w.Stats(), (WriterStats{Flushes: 1, Records: 1, Failures: 1, Dropped: 1, Pending: 1}); got != want {
			t.Fatalf("Stats after failed tick = %+v, want %+v", got, want)
		}
		for _, want := range []string{"flush failed", "err=", "boom", "pending=1", "dropped invalid records", "count=1"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log does not contain %q:\n%s", want, logs)
			}
		}
		store.setHook(nil)
		time.Sleep(interval)
		if n := commits(); n != 2 {
			t.Fatalf("commits after retry = %d, want 2", n)
		}

		// Cancel: Run returns nil at once, with no final flush; the
		// caller's Flush makes it.
		w.Record(put("configmaps", "ns/c", "uc", "3"))
		time.Sleep(interval / 2)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		if n := commits(); n != 2 {
			t.Fatalf("commits after cancel = %d, want 2: Run made a final flush", n)
		}
		if err := w.Flush(t.Context()); err != nil {
			t.Fatalf("final Flush = %v", err)
		}
		if n := commits(); n != 3 {
			t.Fatalf("commits after the final Flush = %d, want 3", n)
		}
		if got, want := w.Stats(), (WriterStats{Flushes: 3, Records: 3, Failures: 1, Dropped: 1}); got != want {
			t.Errorf("final Stats = %+v, want %+v", got, want)
		}
	})
}

// TestWriterRunFile drives Run against a real file in real time.
func TestWriterRunFile(t *testing.T) {
	t.Run("flushes on interval", func(t *testing.T) {
		f, _ := openTemp(t)
		w := NewWriter(f, 5*time.Millisecond, slog.New(slog.NewTextHandler(t.Output(), nil)))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}()

		w.Record(put("configmaps", "ns/a", "ua", "7"))
		want := Snapshot{
			Objects:             map[string]Position{"ns/a": {UID: "ua", ResourceVersion: "7"}},
			LastResourceVersion: "7",
		}
		poll.Until(t, 10*time.Second, func() (bool, string) {
			got := mustLoad(t, f, "configmaps")
			return reflect.DeepEqual(got, want), fmt.Sprintf("checkpoint holds %+v, want %+v", got, want)
		})
	})

	t.Run("leaves the final flush to the caller", func(t *testing.T) {
		f, _ := openTemp(t)
		w := NewWriter(f, time.Hour, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()

		w.Record(put("configmaps", "ns/a", "ua", "7"), del("configmaps", "ns/b", "ub", "8"))
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{Objects: map[string]Position{}})
		if err := w.Flush(t.Context()); err != nil {
			t.Fatalf("final Flush = %v", err)
		}
		assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{
			Objects:             map[string]Position{"ns/a": {UID: "ua", ResourceVersion: "7"}},
			LastResourceVersion: "8",
		})
	})

	t.Run("final flush error", func(t *testing.T) {
		store := newFakeStore(Discard())
		deadline := time.Now().Add(time.Minute)
		var hookErr atomic.Value
		store.setHook(func(ctx context.Context, _ []Record) error {
			// The final flush runs under the caller's deadline, no other.
			if got, ok := ctx.Deadline(); !ok || !got.Equal(deadline) {
				hookErr.Store(fmt.Errorf("final flush context deadline = %v, %v; want the caller's %v", got, ok, deadline))
			}
			return errBoom
		})
		w := NewWriter(store, time.Hour, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		w.Record(put("configmaps", "ns/a", "ua", "7"))
		if err := w.Run(ctx); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		fctx, fcancel := context.WithDeadline(context.Background(), deadline)
		defer fcancel()
		if err := w.Flush(fctx); !errors.Is(err, errBoom) {
			t.Fatalf("final Flush = %v, want %v", err, errBoom)
		}
		if err, _ := hookErr.Load().(error); err != nil {
			t.Error(err)
		}
		if got := w.Stats().Pending; got != 1 {
			t.Errorf("Pending = %d, want 1", got)
		}
	})
}

// orderedStore fails the test if a committed resourceVersion for a key is not
// higher than the one committed before it, i.e. if batches landed out of
// order.
type orderedStore struct {
	Store
	t    *testing.T
	mu   sync.Mutex
	last map[pendingKey]uint64
}

func (s *orderedStore) Commit(ctx context.Context, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Store.Commit(ctx, recs); err != nil {
		return err
	}
	for _, r := range recs {
		k := pendingKey{r.Resource, r.Key}
		rv, err := strconv.ParseUint(r.ResourceVersion, 10, 64)
		if err != nil {
			s.t.Errorf("record %+v: %v", r, err)
			continue
		}
		if rv <= s.last[k] {
			s.t.Errorf("%v committed at rv %d after rv %d", k, rv, s.last[k])
		}
		s.last[k] = rv
	}
	return nil
}

// TestWriterConcurrent has many goroutines record while Run flushes on a
// short interval and other goroutines flush and read stats. Run it with
// -race.
func TestWriterConcurrent(t *testing.T) {
	const (
		writers       = 16
		perWriter     = 2000
		keysPerWriter = 25
	)
	f, _ := openTemp(t)
	store := &orderedStore{Store: f, t: t, last: map[pendingKey]uint64{}}
	w := NewWriter(store, time.Millisecond, slog.New(slog.NewTextHandler(t.Output(), nil)))

	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()

	stop := make(chan struct{})
	var helpers sync.WaitGroup
	for range 2 {
		helpers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.Flush(ctx); err != nil {
					t.Errorf("Flush: %v", err)
				}
				_ = w.Stats()
			}
		})
	}

	var rv atomic.Uint64
	want := make([]map[string]Record, writers)
	var wg sync.WaitGroup
	for g := range writers {
		want[g] = map[string]Record{}
		wg.Go(func() {
			resource := []string{"configmaps", "secrets"}[g%2]
			for i := range perWriter {
				key := fmt.Sprintf("ns-%d/obj-%d", g, i%keysPerWriter)
				r := put(resource, key, fmt.Sprintf("uid-%d-%d", g, i%keysPerWriter), strconv.FormatUint(rv.Add(1), 10))
				r.Deleted = i%7 == 0
				w.Record(r)
				want[g][key] = r
			}
		})
	}
	wg.Wait()
	close(stop)
	helpers.Wait()
	cancel()
	if err := <-runDone; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatalf("final Flush = %v", err)
	}

	wantSnap := map[string]Snapshot{"configmaps": {Objects: map[string]Position{}}, "secrets": {Objects: map[string]Position{}}}
	for _, recs := range want {
		for key, r := range recs {
			s := wantSnap[r.Resource]
			if !r.Deleted {
				s.Objects[key] = r.Position
			}
			s.LastResourceVersion = LaterResourceVersion(s.LastResourceVersion, r.ResourceVersion)
			wantSnap[r.Resource] = s
		}
	}
	for resource, snap := range wantSnap {
		assertSnapshot(t, mustLoad(t, f, resource), snap)
	}
	st := w.Stats()
	// A flush in progress when ctx is canceled may fail; the final Flush
	// then commits its records.
	if st.Pending != 0 || st.Records == 0 || st.Records > writers*perWriter || st.Failures > 1 {
		t.Errorf("Stats = %+v", st)
	}
	t.Logf("%d records coalesced into %d committed in %d flushes (%d failed)",
		writers*perWriter, st.Records, st.Flushes, st.Failures)
}
