package cache

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
)

// Defaults of Options.
const (
	// DefaultRingSize keeps the latest 4096 changes: a client whose watch
	// ended resumes without a list while fewer changes than that happened
	// since, which covers a reconnect at a few hundred changes a second.
	DefaultRingSize = 4096
	// DefaultQueueLength lets a watcher fall 1024 changes behind before it
	// is cut: a burst of that size is absorbed, a reader that stopped is
	// not kept.
	DefaultQueueLength = 1024
)

// ErrExpired is returned by Watch and Known for a position the Store does
// not hold: older than its ring, or not of this bus at all.
var ErrExpired = errors.New("cache: position not held")

// Event is one change of the Store, at the bus position Pos.
type Event struct {
	// Type is watch.Added, watch.Modified, watch.Deleted, or watch.Bookmark
	// for a position the bus reached without a change of this resource.
	Type watch.EventType
	// Object is the new state; for Deleted, the last one; nil for
	// Bookmark. Its resourceVersion is Pos.
	Object *unstructured.Unstructured
	// Old is the state the Store held before, for Modified and Deleted: a
	// watch with a selector tells from it whether the object entered or
	// left it, and a list at an earlier position rolls back to it.
	Old *unstructured.Unstructured
	// Pos is the bus position of the change.
	Pos string
	// Shared is Object as the watchers fed live share it: encoded once per
	// encoder, whatever their number. Set on the events a Store hands to
	// its watchers' queues when it feeds more than one; nil on those of
	// Initial (see Memory in the package's doc).
	Shared *Shared
}

// Options shape a Store. A zero field takes its default.
type Options struct {
	// RingSize is how many changes the Store keeps for watches that resume
	// from a position; DefaultRingSize when zero.
	RingSize int
	// QueueLength is how many changes a watcher may fall behind before it
	// is cut; DefaultQueueLength when zero.
	QueueLength int
}

// Store is the state of one resource of one cluster. It implements the
// store a client-go Reflector fills (Add, Update, Delete, Replace, Resync,
// Bookmark), and is read by Snapshot, Get and Watch. All methods may be
// called concurrently.
type Store struct {
	opts Options

	mu      sync.RWMutex
	objects map[string]*unstructured.Unstructured
	latest  string
	// bus is the bus position of the latest event, and repeats how many
	// events after the first took a position of their own at it (see
	// positionAt).
	bus     string
	repeats int
	synced  bool
	// ring holds the latest changes: ring[(first+i)%len] for i < n.
	ring     []Event
	first, n int
	watchers map[*Watcher]struct{}
	// changed is closed, and replaced, at every change of latest.
	changed  chan struct{}
	syncedCh chan struct{}
}

// NewStore returns an empty Store, not synced until its first Replace.
func NewStore(opts Options) *Store {
	if opts.RingSize <= 0 {
		opts.RingSize = DefaultRingSize
	}
	if opts.QueueLength <= 0 {
		opts.QueueLength = DefaultQueueLength
	}
	return &Store{
		opts:     opts,
		objects:  map[string]*unstructured.Unstructured{},
		ring:     make([]Event, opts.RingSize),
		watchers: map[*Watcher]struct{}{},
		changed:  make(chan struct{}),
		syncedCh: make(chan struct{}),
	}
}

var _ cache.ReflectorStore = (*Store)(nil)

// Key is the key of an object in a Store: "namespace/name", or "name" for
// a cluster-scoped object.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func keyOf(u *unstructured.Unstructured) string { return Key(u.GetNamespace(), u.GetName()) }

func asObject(obj any) (*unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o, nil
	case cache.DeletedFinalStateUnknown:
		return asObject(o.Obj)
	}
	return nil, fmt.Errorf("cache: %T is not an *unstructured.Unstructured", obj)
}

// Add implements cache.ReflectorStore.
func (s *Store) Add(obj any) error { return s.put(obj) }

// Update implements cache.ReflectorStore.
func (s *Store) Update(obj any) error { return s.put(obj) }

func (s *Store) put(obj any) error {
	u, err := asObject(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(u)
	old := s.objects[k]
	pos := s.positionAt(u.GetResourceVersion())
	if pos != u.GetResourceVersion() {
		u = at(u, pos)
	}
	s.objects[k] = u
	e := Event{Type: watch.Added, Object: u, Pos: pos}
	if old != nil {
		e.Type, e.Old = watch.Modified, old
	}
	s.record(e)
	return nil
}

// Delete implements cache.ReflectorStore. The Deleted event carries the
// object's final state, or, when the consumer knows the delete only by
// key (an object annotated final-state-unknown, or a
// cache.DeletedFinalStateUnknown), the last state the Store held, at the
// delete's position.
func (s *Store) Delete(obj any) error {
	u, err := asObject(obj)
	if err != nil {
		return err
	}
	_, unknown := obj.(cache.DeletedFinalStateUnknown)
	unknown = unknown || u.GetAnnotations()[consumer.AnnotationFinalStateUnknown] == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(u)
	old, ok := s.objects[k]
	if !ok {
		return nil
	}
	delete(s.objects, k)
	pos := s.positionAt(u.GetResourceVersion())
	last := u
	switch {
	case unknown:
		last = at(old, pos)
	case pos != u.GetResourceVersion():
		last = at(u, pos)
	}
	s.record(Event{Type: watch.Deleted, Object: last, Old: old, Pos: pos})
	return nil
}

// at is a copy of u at position pos; u, shared with the ring and with
// readers, is never changed.
func at(u *unstructured.Unstructured, pos string) *unstructured.Unstructured {
	c := u.DeepCopy()
	c.SetResourceVersion(pos)
	return c
}

// Replace implements cache.ReflectorStore: the Store becomes list, at
// position pos. Watchers are told the difference (objects gone as
// Deleted, new ones as Added, changed ones as Modified). Each change has
// a position of its own, so that a client resumes exactly after the last
// one it got: the first is at pos, the others after it at pos~i (see
// positionAt). The first list, which no watcher saw, is all at pos.
func (s *Store) Replace(list []any, pos string) error {
	next := make(map[string]*unstructured.Unstructured, len(list))
	for _, o := range list {
		u, err := asObject(o)
		if err != nil {
			return err
		}
		next[keyOf(u)] = u
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var changes []Event // Object the new state, nil for a delete
	for k, old := range s.objects {
		if _, ok := next[k]; !ok {
			changes = append(changes, Event{Type: watch.Deleted, Old: old})
		}
	}
	for k, u := range next {
		old, ok := s.objects[k]
		switch {
		case ok && sameState(old, u):
			next[k] = old // the held state, so that the ring's pointers stay shared
		case ok:
			changes = append(changes, Event{Type: watch.Modified, Object: u, Old: old})
		default:
			changes = append(changes, Event{Type: watch.Added, Object: u})
		}
	}
	for _, e := range changes {
		e.Pos = pos
		if s.synced {
			e.Pos = s.positionAt(pos)
		}
		if e.Type == watch.Deleted {
			e.Object = at(e.Old, e.Pos)
		} else {
			if e.Object.GetResourceVersion() != e.Pos {
				// A change the Store learns at e.Pos: a client that
				// resumes from its event's object resumes from there.
				e.Object = at(e.Object, e.Pos)
			}
			next[keyOf(e.Object)] = e.Object
		}
		s.record(e)
	}
	s.objects = next
	s.bookmark(pos)
	if !s.synced {
		s.synced = true
		close(s.syncedCh)
	}
	return nil
}

// positionAt is the position of a change the Store learns at bus
// position pos: pos for the first event at pos, and for each later one
// (the changes of a relist, an object deleted and created again unseen)
// pos~i, i counting from 1, a form no bus position takes. So every event
// has a position of its own, and a client resumes exactly after the last
// one it got. Called with mu held.
func (s *Store) positionAt(pos string) string {
	if pos != s.bus {
		s.bus, s.repeats = pos, 0
		return pos
	}
	s.repeats++
	return pos + "~" + strconv.Itoa(s.repeats)
}

// bookmark records that the bus reached pos, unless an event already
// holds pos: a bookmark there would hide the changes after it from a
// client resuming at pos. Called with mu held.
func (s *Store) bookmark(pos string) {
	if pos != "" && pos != s.bus {
		s.bus, s.repeats = pos, 0
		s.record(Event{Type: watch.Bookmark, Pos: pos})
	}
}

// sameState reports whether a and b are the same state of one object: the
// same uid at the same API resourceVersion.
func sameState(a, b *unstructured.Unstructured) bool {
	return a.GetUID() == b.GetUID() && a.GetAnnotations()[consumer.AnnotationResourceVersion] == b.GetAnnotations()[consumer.AnnotationResourceVersion]
}

// Resync implements cache.ReflectorStore; a Store has nothing to resync.
func (s *Store) Resync() error { return nil }

// Bookmark records that the bus reached pos with no change of this
// resource (cache.ReflectorBookmarkStore).
func (s *Store) Bookmark(pos string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bookmark(pos)
	return nil
}

// record appends e to the ring, makes its position the latest and hands
// it, with its object shared, to every watcher; the ring keeps no Shared,
// so that encodings live only as long as a watcher's queue holds them.
// Called with mu held.
func (s *Store) record(e Event) {
	i := (s.first + s.n) % len(s.ring)
	s.ring[i] = e
	if s.n < len(s.ring) {
		s.n++
	} else {
		s.first = (s.first + 1) % len(s.ring)
	}
	if e.Pos != s.latest {
		s.latest = e.Pos
		close(s.changed)
		s.changed = make(chan struct{})
	}
	if e.Object != nil && len(s.watchers) > 1 { // one watcher shares with nobody
		e.Shared = NewShared(e.Object)
	}
	for w := range s.watchers {
		select {
		case w.queue <- e:
		default:
			s.cut(w)
		}
	}
}

// Synced is closed once the Store holds a whole list.
func (s *Store) Synced() <-chan struct{} { return s.syncedCh }

// Len is how many objects the Store holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.objects)
}

// Latest is the position of the Store's state.
func (s *Store) Latest() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.latest
}

// Snapshot returns every object whose key is after from ("" for all), in
// key order, and the position of that state.
func (s *Store) Snapshot(after string) ([]*unstructured.Unstructured, string) {
	s.mu.RLock()
	out := inKeyOrder(s.objects, after)
	pos := s.latest
	s.mu.RUnlock()
	return out, pos
}

// SnapshotAt returns every object whose key is after from ("" for all), in
// key order, as the state was at pos: the next pages of a list read at
// pos. It fails with ErrExpired when pos is neither the latest position
// nor in the ring.
func (s *Store) SnapshotAt(after, pos string) ([]*unstructured.Unstructured, error) {
	s.mu.RLock()
	state := make(map[string]*unstructured.Unstructured, len(s.objects))
	for k, u := range s.objects {
		if after == "" || k > after {
			state[k] = u
		}
	}
	if pos != s.latest {
		i := s.find(pos)
		if i < 0 {
			s.mu.RUnlock()
			return nil, ErrExpired
		}
		// Undo the changes after pos, newest first: the ring holds the
		// state each replaced.
		for j := s.n - 1; j > i; j-- {
			e := s.ring[(s.first+j)%len(s.ring)]
			if e.Type == watch.Bookmark {
				continue
			}
			k := keyOf(e.Object)
			if after != "" && k <= after {
				continue
			}
			if e.Old == nil {
				delete(state, k)
			} else {
				state[k] = e.Old
			}
		}
	}
	s.mu.RUnlock()
	return inKeyOrder(state, ""), nil
}

// inKeyOrder returns the objects of byKey whose key is after after ("" for
// all), in key order. It sorts the map's own keys: a list of 10,000
// objects must not build each object's key again at every comparison.
func inKeyOrder(byKey map[string]*unstructured.Unstructured, after string) []*unstructured.Unstructured {
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		if after == "" || k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*unstructured.Unstructured, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

// Get returns the object of key, and the position of the Store's state.
func (s *Store) Get(key string) (*unstructured.Unstructured, string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.objects[key]
	return u, s.latest, ok
}

// Known reports whether pos is the Store's latest position or one its ring
// holds, and returns a channel closed at the next change of position, for
// a caller that waits for pos to arrive.
func (s *Store) Known(pos string) (bool, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if pos == s.latest {
		return true, s.changed
	}
	return s.find(pos) >= 0, s.changed
}

// find returns the ring index i (0 oldest) of the last event at pos, or
// -1. Called with mu held.
func (s *Store) find(pos string) int {
	for i := s.n - 1; i >= 0; i-- {
		if s.ring[(s.first+i)%len(s.ring)].Pos == pos {
			return i
		}
	}
	return -1
}
