package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A watch whose Log fails (not expired) is held open, then ended cleanly,
// so that the reflector watches again from its position without a list.
// It is held for at least minWatchLife (a reflector lists again after a
// watch shorter than a second with no event), and backs off up to
// maxFailureWait while the failures go on.
const (
	minWatchLife   = 1100 * time.Millisecond
	maxFailureWait = 30 * time.Second
)

// errStopped ends a Follow whose watch was stopped.
var errStopped = errors.New("consumer: watch stopped")

// watcher is one watch: a Follow of the Log, its records made events.
type watcher struct {
	lw        *ListerWatcher
	ch        chan watch.Event
	stop      chan struct{}
	stopOnce  sync.Once
	bookmarks bool
}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

// Stop implements watch.Interface. The channel closes soon after.
func (w *watcher) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// WatchWithContext implements cache.WatcherWithContext. It continues from
// opts.ResourceVersion, which must be the position this ListerWatcher
// handed out last (a list's, or its last event's); any other is answered
// with 410 Gone, so that the reflector lists again. It honours
// TimeoutSeconds by ending the watch cleanly, and sends bookmarks when
// AllowWatchBookmarks is set.
func (lw *ListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if !lw.begin() {
		return nil, ErrClosed
	}
	w := &watcher{lw: lw, ch: make(chan watch.Event), stop: make(chan struct{}), bookmarks: opts.AllowWatchBookmarks}
	lw.mu.Lock()
	if lw.closed {
		// Closed since begin: Close did not see this watch to stop it.
		lw.mu.Unlock()
		lw.run.Unlock()
		return nil, ErrClosed
	}
	lw.active = w
	lw.mu.Unlock()

	rv := opts.ResourceVersion
	if lw.t == nil || lw.dirty || rv == "" || (rv != lw.emitted && rv != lw.applied) {
		go w.expire(fmt.Errorf("consumer: watch from %q: not the position this ListerWatcher handed out last", rv), rv)
		return w, nil
	}
	var cancel context.CancelFunc
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*opts.TimeoutSeconds)*time.Second)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	go w.run(ctx, cancel, lw.applied)
	return w, nil
}

// run follows the Log from pos until the watch ends. It owns run.
func (w *watcher) run(ctx context.Context, cancel context.CancelFunc, pos string) {
	lw := w.lw
	defer lw.run.Unlock()
	defer close(w.ch)
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	err := lw.log.Follow(ctx, pos, w.handle)
	lw.flushSnapshot(false)
	switch {
	case w.stopped() || errors.Is(err, errStopped):
	case errors.Is(err, ErrExpired):
		w.expired(err, pos)
	case ctx.Err() != nil:
		// TimeoutSeconds passed, or the caller's context ended: a clean
		// end, from which the reflector watches again.
	default:
		lw.failures++
		wait := min(time.Duration(1<<min(lw.failures-1, 6))*time.Second, maxFailureWait)
		wait = max(wait, minWatchLife-time.Since(start))
		lw.logger.Warn("consumer: following the bus failed; watching again", "position", lw.applied, "retryIn", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-w.stop:
		}
	}
}

func (w *watcher) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// expire answers a watch with 410 Gone at once. It owns run.
func (w *watcher) expire(err error, pos string) {
	defer w.lw.run.Unlock()
	defer close(w.ch)
	w.expired(err, pos)
}

// expired sends the 410 Gone that makes the reflector list again.
func (w *watcher) expired(err error, pos string) {
	lw := w.lw
	lw.c.expired.Add(1)
	if lw.m != nil {
		lw.m.expired.WithLabelValues(lw.opts.Name).Inc()
	}
	lw.logger.Warn("consumer: position expired (410 Gone); the informer lists again", "position", pos, "err", err)
	status := apierrors.NewResourceExpired(err.Error()).ErrStatus
	w.send(watch.Event{Type: watch.Error, Object: &status})
}

// send hands an event to the reflector; false when the watch stopped.
func (w *watcher) send(ev watch.Event) bool {
	select {
	case w.ch <- ev:
		return true
	case <-w.stop:
		return false
	}
}

// handle makes the events of one record. Called by Follow, with run held
// by the watch.
func (w *watcher) handle(r Record) error {
	lw := w.lw
	lw.failures = 0
	if r.Progress() {
		lw.applied = r.Position
		if w.bookmarks {
			if !w.send(watch.Event{Type: watch.Bookmark, Object: bookmark(lw.t.tm, r.Position)}) {
				return errStopped
			}
			lw.emitted = r.Position
			lw.counted(watch.Bookmark)
		}
		lw.flushSnapshot(false)
		return nil
	}
	t := lw.t
	out := t.apply(r)
	lw.account(r, out)
	events := make([]watch.Event, len(out.changes))
	for i, ch := range out.changes {
		events[i] = watch.Event{Type: ch.typ, Object: lw.object(t, ch, r.Position)}
	}
	lw.remember(t, out)
	lw.applied = r.Position
	for _, ev := range events {
		if !w.send(ev) {
			lw.dirty = true
			return errStopped
		}
		lw.emitted = r.Position
		lw.counted(ev.Type)
	}
	if len(events) > 0 {
		lw.c.held.Store(uint64(t.nheld))
	}
	lw.flushSnapshot(false)
	return nil
}
