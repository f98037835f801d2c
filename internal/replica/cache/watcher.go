package cache

import "k8s.io/apimachinery/pkg/watch"

// Watcher receives a Store's changes from where its watch started. Read
// Initial first, then Events until it is closed; Stop it when done.
type Watcher struct {
	s *Store
	// Initial are the events before the live ones: the current state as
	// Added (a watch of the state), or the ring's changes after the start
	// position (a watch that resumes). It belongs to the caller that
	// started the watch; the Watcher never touches it again.
	Initial []Event
	// Start is the position the watch started at: after Initial, the
	// watcher has every change up to it.
	Start string
	queue chan Event
	done  chan struct{} // closed with queue
	// wasCut and stopped are guarded by s.mu.
	wasCut, stopped bool
}

// WatchState starts a watch with the Store's current state: every object
// as Added at the latest position, then every change.
func (s *Store) WatchState() *Watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.register(s.latest)
	w.Initial = make([]Event, 0, len(s.objects))
	for _, u := range s.objects {
		w.Initial = append(w.Initial, Event{Type: watch.Added, Object: u, Pos: s.latest})
	}
	return w
}

// WatchFrom starts a watch of every change after pos. It fails with
// ErrExpired when pos is neither the latest position nor in the ring.
// Every change has a position of its own (a relist's too, see Replace),
// so a client at pos has every change up to it and gets each later one
// once.
func (s *Store) WatchFrom(pos string) (*Watcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(pos)
	if i < 0 && pos != s.latest {
		return nil, ErrExpired
	}
	var replay []Event
	if i >= 0 {
		for j := i + 1; j < s.n; j++ {
			replay = append(replay, s.ring[(s.first+j)%len(s.ring)])
		}
	}
	w := s.register(s.latest)
	w.Initial = replay
	return w, nil
}

// register adds a watcher at pos. Called with mu held.
func (s *Store) register(pos string) *Watcher {
	w := &Watcher{s: s, Start: pos, queue: make(chan Event, s.opts.QueueLength), done: make(chan struct{})}
	s.watchers[w] = struct{}{}
	return w
}

// cut ends w, whose queue is full. Called with mu held.
func (s *Store) cut(w *Watcher) {
	w.wasCut = true
	s.drop(w)
}

// drop unregisters w and closes its queue. Called with mu held.
func (s *Store) drop(w *Watcher) {
	if _, ok := s.watchers[w]; !ok {
		return
	}
	delete(s.watchers, w)
	close(w.queue)
	close(w.done)
}

// Events are the live changes; closed when the watcher is stopped or cut.
func (w *Watcher) Events() <-chan Event { return w.queue }

// Done is closed when the watcher is stopped or cut, at once, while Events
// may still hold changes: a reader blocked elsewhere (writing to a client
// that does not read) learns of the cut from it.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Cut reports whether the watcher was cut for falling behind.
func (w *Watcher) Cut() bool {
	w.s.mu.RLock()
	defer w.s.mu.RUnlock()
	return w.wasCut
}

// Stop ends the watcher and releases its queue; safe to call twice.
func (w *Watcher) Stop() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.stopped = true
	w.s.drop(w)
}

// Watchers is how many watchers the Store feeds.
func (s *Store) Watchers() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.watchers)
}
