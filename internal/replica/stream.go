package replica

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/internal/replica/cache"
)

// annotationInitialEventsEnd marks the bookmark that ends the initial
// events of a watch that asked for them (sendInitialEvents), as the API
// server marks it.
const annotationInitialEventsEnd = "k8s.io/initial-events-end"

// streamSource is what one watch streams.
type streamSource struct {
	watcher *cache.Watcher
	sel     selection
	gvk     schema.GroupVersionKind
	// bookmarks: send BOOKMARK events (allowWatchBookmarks).
	bookmarks bool
	// initialEnd: end the initial events with the marked bookmark.
	initialEnd bool
}

// watchStream is a watch.Interface on a cache.Watcher: it applies the
// selection (an object that leaves it is Deleted, one that enters it
// Added), sends bookmarks, and ends when its context ends, it is
// stopped, or the watcher is cut.
type watchStream struct {
	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func (w *watchStream) ResultChan() <-chan watch.Event { return w.result }

func (w *watchStream) Stop() { w.once.Do(func() { close(w.stop) }) }

func (s *Server) stream(ctx context.Context, src streamSource) watch.Interface {
	w := &watchStream{result: make(chan watch.Event), stop: make(chan struct{})}
	s.m.watchers.Inc()
	go func() {
		defer s.m.watchers.Dec()
		defer close(w.result)
		defer src.watcher.Stop()
		s.pump(ctx, w, src)
	}()
	return w
}

func (s *Server) pump(ctx context.Context, w *watchStream, src streamSource) {
	// ended counts and logs a cut.
	ended := func() {
		if src.watcher.Cut() {
			s.m.cut.Inc()
			s.log.Info("replica: watch cut: the client read slower than changes arrived", "kind", src.gvk.String(), "queue", s.cfg.Cache.QueueLength)
		}
	}
	send := func(e watch.Event) bool {
		select {
		case w.result <- e:
			if e.Type != watch.Bookmark {
				s.m.served.Inc()
			}
			return true
		case <-src.watcher.Done():
			// Cut while the client was not reading this event: the
			// watch ends now, not once the client reads again.
			ended()
		case <-w.stop:
		case <-ctx.Done():
		}
		return false
	}
	pos := src.watcher.Start
	initial := src.watcher.Initial
	src.watcher.Initial = nil
	for i, e := range initial {
		initial[i] = cache.Event{} // release as sent
		if out, ok := src.sel.sharedEvent(e); ok && !send(out) {
			return
		}
		if e.Pos != "" {
			pos = e.Pos
		}
	}
	if src.initialEnd {
		b := bookmarkObject(src.gvk, pos)
		b.SetAnnotations(map[string]string{annotationInitialEventsEnd: "true"})
		if !send(watch.Event{Type: watch.Bookmark, Object: b}) {
			return
		}
	}
	bookmarked := pos
	tick := time.NewTicker(s.cfg.BookmarkInterval)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-src.watcher.Events():
			if !ok {
				ended()
				return
			}
			if out, ok := src.sel.sharedEvent(e); ok && !send(out) {
				return
			}
			pos = e.Pos
		case <-tick.C:
			if src.bookmarks && pos != bookmarked {
				if !send(watch.Event{Type: watch.Bookmark, Object: bookmarkObject(src.gvk, pos)}) {
					return
				}
				bookmarked = pos
			}
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// event is e as a watch of sel sees it, if it sees it.
func (sel selection) event(e cache.Event) (watch.Event, bool) {
	switch e.Type {
	case watch.Bookmark:
		return watch.Event{}, false
	case watch.Modified:
		now, before := sel.matches(e.Object), e.Old != nil && sel.matches(e.Old)
		switch {
		case now && before:
			return watch.Event{Type: watch.Modified, Object: e.Object}, true
		case now:
			return watch.Event{Type: watch.Added, Object: e.Object}, true
		case before:
			return watch.Event{Type: watch.Deleted, Object: e.Object}, true
		}
		return watch.Event{}, false
	case watch.Deleted:
		// The watch saw the object as the Store held it (Old): its final
		// state may have left the selection, or be an identity only.
		if e.Old != nil && !sel.matches(e.Old) || e.Old == nil && !sel.matches(e.Object) {
			return watch.Event{}, false
		}
		return watch.Event{Type: watch.Deleted, Object: e.Object}, true
	}
	if !sel.matches(e.Object) {
		return watch.Event{}, false
	}
	return watch.Event{Type: e.Type, Object: e.Object}, true
}

// sharedEvent is sel.event(e), whose object is e.Shared when the cache
// shares it: the API server's watch handler then encodes it once for
// every watcher that encodes it alike.
func (sel selection) sharedEvent(e cache.Event) (watch.Event, bool) {
	out, ok := sel.event(e)
	if ok && e.Shared != nil {
		out.Object = e.Shared
	}
	return out, ok
}

// bookmarkObject is the object of a BOOKMARK event at pos.
func bookmarkObject(gvk schema.GroupVersionKind, pos string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetResourceVersion(pos)
	return u
}
