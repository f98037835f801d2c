package cache

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/consumer"
)

func object(name string, pos int, apiRV string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetResourceVersion("p" + strconv.Itoa(pos))
	u.SetAnnotations(map[string]string{consumer.AnnotationResourceVersion: apiRV})
	return u
}

// A watch from a position in the ring gets every change after it, in
// order; one from a position the ring no longer holds is refused.
func TestWatchFromPosition(t *testing.T) {
	s := NewStore(Options{RingSize: 8})
	if err := s.Replace([]any{object("a", 1, "10")}, "p1"); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 5; i++ {
		if err := s.Update(object("a", i, strconv.Itoa(10*i))); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.WatchFrom("p3")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range w.Initial {
		got = append(got, string(e.Type)+"@"+e.Pos)
	}
	if fmt.Sprint(got) != "[MODIFIED@p4 MODIFIED@p5]" {
		t.Errorf("replay from p3: %v", got)
	}
	w.Stop()
	for i := 6; i <= 20; i++ {
		_ = s.Update(object("a", i, strconv.Itoa(10*i)))
	}
	if _, err := s.WatchFrom("p3"); err != ErrExpired {
		t.Errorf("watch from a position out of the ring: %v, want ErrExpired", err)
	}
	if w, err := s.WatchFrom("p20"); err != nil || len(w.Initial) != 0 {
		t.Errorf("watch from the latest position: %v, %d events", err, len(w.Initial))
	}
}

// A relist tells watchers the difference: gone objects Deleted, new ones
// Added, changed ones Modified, unchanged ones nothing.
func TestReplaceDiff(t *testing.T) {
	s := NewStore(Options{})
	_ = s.Replace([]any{object("a", 1, "10"), object("b", 1, "11"), object("c", 1, "12")}, "p1")
	w, _ := s.WatchFrom("p1")
	_ = s.Replace([]any{object("a", 2, "10"), object("b", 2, "20"), object("d", 2, "21")}, "p2")
	got := map[string]watch.EventType{}
	for len(w.Events()) > 0 {
		e := <-w.Events()
		if e.Type != watch.Bookmark {
			got[e.Object.GetName()] = e.Type
		}
	}
	want := map[string]watch.EventType{"b": watch.Modified, "c": watch.Deleted, "d": watch.Added}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("relist events %v, want %v", got, want)
	}
}

// A watcher that stops reading is cut once its queue
// is full, and its memory released, while thousands of changes flow; the
// Store never blocks on it, and a reading watcher gets every change.
func TestNonReadingWatcherIsCut(t *testing.T) {
	const queue, changes = 64, 20000
	s := NewStore(Options{QueueLength: queue, RingSize: 128})
	_ = s.Replace(nil, "p0")
	stalled, _ := s.WatchFrom("p0")
	reader, _ := s.WatchFrom("p0")
	read := 0
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 1; i <= changes; i++ {
		if err := s.Add(object(fmt.Sprintf("cm-%d", i%500), i, strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		for len(reader.Events()) > 0 {
			<-reader.Events()
			read++
		}
		if i == changes/2 && !stalled.Cut() {
			t.Fatalf("after %d changes the stalled watcher (queue %d) is not cut", i, queue)
		}
	}
	if n := len(stalled.queue); n > queue {
		t.Errorf("stalled watcher holds %d events, more than its queue of %d", n, queue)
	}
	if s.Watchers() != 1 {
		t.Errorf("%d watchers registered, want only the reading one", s.Watchers())
	}
	if read != changes || reader.Cut() {
		t.Errorf("the reading watcher got %d of %d changes (cut: %v)", read, changes, reader.Cut())
	}
	if _, open := <-stalled.Events(); open {
		// Drain what it held: its queue is closed, so this ends.
		for range stalled.Events() {
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// 500 live objects and a ring of 128: far below what 20000 queued
	// changes would hold.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Errorf("heap grew by %d bytes over %d changes", grew, changes)
	}
}

// stubOf is an identity-only deleted object at position pos, as the
// consumer hands out for a delete whose last state it does not have.
func stubOf(name string, pos int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetResourceVersion("p" + strconv.Itoa(pos))
	u.SetAnnotations(map[string]string{consumer.AnnotationFinalStateUnknown: "true"})
	return u
}

// An object deleted and created again unseen reaches the Store as two
// changes at one bus position: each has a position of its own, so a
// client whose watch ended right after the Deleted resumes from it and
// gets the Added, and a bookmark at that bus position hides neither.
func TestTwoChangesAtOnePosition(t *testing.T) {
	s := NewStore(Options{})
	_ = s.Replace([]any{object("a", 1, "10")}, "p1")
	w, _ := s.WatchFrom("p1")
	_ = s.Delete(object("a", 2, "10"))
	again := object("a", 2, "20")
	again.SetUID("uid-a-again")
	_ = s.Add(again)
	_ = s.Bookmark("p2")
	deleted := <-w.Events()
	w.Stop()
	if deleted.Type != watch.Deleted {
		t.Fatalf("first change %s, want DELETED", deleted.Type)
	}
	r, err := s.WatchFrom(deleted.Pos)
	if err != nil {
		t.Fatalf("resume from the Deleted's position %q: %v", deleted.Pos, err)
	}
	defer r.Stop()
	var got []string
	for _, e := range r.Initial {
		got = append(got, string(e.Type)+" "+string(e.Object.GetUID()))
		if e.Pos == deleted.Pos || e.Object.GetResourceVersion() != e.Pos {
			t.Errorf("%s at %q, object at %q: want a position of its own, the object's", e.Type, e.Pos, e.Object.GetResourceVersion())
		}
	}
	if fmt.Sprint(got) != "[ADDED uid-a-again]" {
		t.Errorf("resume from the Deleted's position %q: %v, want the Added", deleted.Pos, got)
	}
	if u, _, _ := s.Get(Key("ns", "a")); u.GetResourceVersion() != s.Latest() {
		t.Errorf("held object at %q, latest %q", u.GetResourceVersion(), s.Latest())
	}
}
