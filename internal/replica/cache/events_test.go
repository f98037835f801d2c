package cache

import (
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	clientcache "k8s.io/client-go/tools/cache"
)

// drain returns what w's queue holds now.
func drain(w *Watcher) []Event {
	var out []Event
	for len(w.Events()) > 0 {
		out = append(out, <-w.Events())
	}
	return out
}

// Every event's object is at the event's position: a client resumes from
// the resourceVersion of the last object it got, so an older one there
// would replay changes it has already seen. The held object is shared
// with earlier events and lists and is never changed.
func TestEventObjectAtEventPosition(t *testing.T) {
	s := NewStore(Options{})
	held := object("gone", 1, "10")
	_ = s.Replace([]any{held, object("kept", 1, "11"), object("changed", 1, "9")}, "p1")
	w, _ := s.WatchFrom("p1")
	_ = s.Replace([]any{object("kept", 1, "11"), object("changed", 1, "12"), object("new", 1, "13")}, "p2")
	var deleted, other int
	for _, e := range drain(w) {
		if e.Type == watch.Bookmark {
			continue
		}
		if got := e.Object.GetResourceVersion(); got != e.Pos {
			t.Errorf("%s %s at %s carries resourceVersion %s", e.Type, e.Object.GetName(), e.Pos, got)
		}
		if e.Type == watch.Deleted {
			deleted++
		} else {
			other++
		}
	}
	if deleted != 1 || other != 2 {
		t.Errorf("%d DELETED and %d other events, want 1 and 2", deleted, other)
	}
	if held.GetResourceVersion() != "p1" {
		t.Errorf("the held object was changed: resourceVersion %s", held.GetResourceVersion())
	}
}

// A delete the consumer knows only by key (an identity-only stub) reaches
// watchers with the last state the Store held, at the delete's position,
// so that a watch with a label selector matches it as it matched that
// state.
func TestDeleteOfStubCarriesHeldState(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  func() any
	}{
		{"stub", func() any { return stubOf("a", 2) }},
		{"final state unknown", func() any {
			return clientcache.DeletedFinalStateUnknown{Key: "ns/a", Obj: stubOf("a", 2)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Options{})
			held := object("a", 1, "10")
			held.SetLabels(map[string]string{"app": "x"})
			_ = s.Replace([]any{held}, "p1")
			w, _ := s.WatchFrom("p1")
			if err := s.Delete(tc.obj()); err != nil {
				t.Fatal(err)
			}
			evs := drain(w)
			if len(evs) != 1 || evs[0].Type != watch.Deleted {
				t.Fatalf("events %v, want one DELETED", evs)
			}
			e := evs[0]
			if e.Pos != "p2" || e.Object.GetResourceVersion() != "p2" {
				t.Errorf("DELETED at %s with object at %s, want p2", e.Pos, e.Object.GetResourceVersion())
			}
			if e.Object.GetLabels()["app"] != "x" {
				t.Errorf("DELETED object has labels %v, want the held state's", e.Object.GetLabels())
			}
			if e.Old != held {
				t.Errorf("DELETED Old is not the held state")
			}
			if held.GetResourceVersion() != "p1" {
				t.Errorf("the held object was changed: resourceVersion %s", held.GetResourceVersion())
			}
		})
	}
}

// A relist's changes each have a position of their own, its first the
// relist's: a client that got the first and resumes from its object gets
// the others (a lost DELETED leaves a ghost), and one at the Store's
// latest position after the relist (a list) gets none again.
func TestWatchFromReplaysEveryChangeAtItsPosition(t *testing.T) {
	s := NewStore(Options{})
	_ = s.Replace([]any{object("a", 1, "10"), object("b", 1, "11")}, "p1")
	_ = s.Replace(nil, "p2")
	all, _ := s.WatchFrom("p1")
	if len(all.Initial) != 2 || all.Initial[0].Type != watch.Deleted {
		t.Fatalf("a watch from p1: %v, want two deletes", all.Initial)
	}
	// The client got the first delete and resumes from its object.
	first := all.Initial[0].Object
	w, err := s.WatchFrom(first.GetResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{first.GetName(): true}
	for _, e := range w.Initial {
		if e.Type == watch.Deleted {
			if deleted[e.Object.GetName()] {
				t.Errorf("a watch from %s repeats the delete of %s", first.GetResourceVersion(), e.Object.GetName())
			}
			deleted[e.Object.GetName()] = true
		}
	}
	if !deleted["a"] || !deleted["b"] {
		t.Errorf("after the delete of %s, a watch from its %s leaves out a delete: got %v", first.GetName(), first.GetResourceVersion(), deleted)
	}
	// The latest position after the relist has all of its changes: none
	// is sent again, and the relist's bookmark at p2 hides none.
	_ = s.Bookmark("p2")
	if w, _ := s.WatchFrom(s.Latest()); len(w.Initial) != 0 {
		t.Errorf("a watch from %s, the relist's latest position, replays %d events", s.Latest(), len(w.Initial))
	}
	if w, _ := s.WatchFrom("p2"); len(w.Initial) != 1 {
		t.Errorf("a watch from p2, the relist's first change, replays %d events, want 1", len(w.Initial))
	}
	_ = s.Add(object("c", 3, "12"))
	if w, _ := s.WatchFrom("p3"); len(w.Initial) != 0 {
		t.Errorf("a watch from p3, the latest, replays %d events", len(w.Initial))
	}
}
