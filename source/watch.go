package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// DefaultStallTimeout is the stall timeout when Options leave it unset.
// Measured on kube-apiserver 1.37 (a watch of a quiet namespace's
// ConfigMaps, over eight minutes): the first bookmark came 2m0s after the
// watch opened, then one every 60s, give or take 0.6s. Waiting for
// bookmarks alone would thus need more than two minutes; instead the
// source has the API server end every watch after half the stall timeout
// (a minute by default), and a watch the API server ends is contact, so a
// healthy watch is heard from at least every minute. (An opened watch is
// not contact: a stuck API server or proxy opens watches too; nor is a
// dropped one.) Two minutes tolerates one missed minute without a
// false alarm, and reports a dead connection or a revoked permission within
// two to three minutes.
const DefaultStallTimeout = 2 * time.Minute

// ErrWatchForbidden is wrapped by Check's error when the API server lets
// the bridge list a resource but not watch it.
var ErrWatchForbidden = errors.New("forbidden to watch")

type watchKey struct{ resource, namespace string }

// Watches reports the health of every reflector, one per resource and
// namespace. It may be called at any time, from any goroutine.
func (s *Source) Watches() []WatchStatus {
	now := time.Now()
	out := make([]WatchStatus, 0, len(s.health))
	for _, res := range s.opts.Resources {
		for _, ns := range s.namespacesFor(res) {
			out = append(out, s.health[watchKey{res.Name(), ns}].status(now))
		}
	}
	return out
}

// failing is, when a call of one of the source's reflectors has kept
// failing (or been cut for no answer) for longer than the stall timeout,
// that watch's status error; nil otherwise. A reflector only silent, as
// one waiting for a large list's answer, is not failing.
func (s *Source) failing(now time.Time) error {
	for _, h := range s.health {
		h.mu.Lock()
		since := h.failingSince
		st := h.statusLocked(now)
		h.mu.Unlock()
		if !since.IsZero() && now.Sub(since) > h.timeout {
			return st.Err
		}
	}
	return nil
}

// Healthy is nil while every watch is healthy; otherwise it joins the
// reasons of those that are not: a watch that heard nothing from the API
// server for longer than the stall timeout, or whose calls kept failing
// for longer than that (for example, when the bridge's permissions were
// revoked).
func (s *Source) Healthy() error { return unhealthy(s.Watches()) }

// unhealthy joins the errors of the watches that are not healthy.
func unhealthy(sts []WatchStatus) error {
	var errs []error
	for _, st := range sts {
		if st.Err != nil {
			errs = append(errs, st.Err)
		}
	}
	return errors.Join(errs...)
}

// watch opens a watch for the reflector of res in ns and follows it: the
// watch is cut if it hears nothing for longer than the stall timeout, an
// error that ends it (or a dropped connection) is counted and logged, and
// every event after the initial list, and an end by the API server, tell
// h that the watch works.
func (s *Source) watch(ctx context.Context, client apiClient, res Resource, ns string, h *health, o metav1.ListOptions) (watch.Interface, error) {
	initialEvents := o.SendInitialEvents != nil && *o.SendInitialEvents
	// The API server ends a watch after TimeoutSeconds, and the reflector
	// opens the next one at once. Ending every watch within half the stall
	// timeout means a healthy watch is heard from in time even with no
	// bookmarks, and permissions are checked again that often: a revoked
	// one shows within the stall timeout. A watch that streams the initial
	// list cannot be given a shorter timeout, since the list may take long
	// on a large resource: the source ends it itself soon after the list
	// is in (renewAfter), which the reflector takes as a watch that closed
	// and opens the next one from where it was.
	if half := int64(s.opts.StallTimeout / 2 / time.Second); !initialEvents && half > 0 &&
		(o.TimeoutSeconds == nil || *o.TimeoutSeconds > half) {
		o.TimeoutSeconds = &half
	}
	wctx, cancel := context.WithCancelCause(ctx)
	call, done := h.watching(time.Now(), cancel)
	st := s.newStream(res, VerbWatch, ns)
	w, err := client.Watch(withStream(wctx, st), o)
	if err != nil {
		cut := errors.Is(context.Cause(wctx), ErrStalled)
		done()
		if !cut && !watchListRefused(o, err) { // a cut was reported by the watchdog
			s.onWatchError(ctx, res, ns, err)
			h.failed(time.Now(), err)
		}
		return nil, err
	}
	// An opened watch is not contact: an API server whose watches are
	// stuck, or a proxy, answers 200 and then sends nothing. The watch
	// proves itself by what it delivers after the initial list, or by the
	// API server ending it.
	var erred bool           // an Error event came: the watch did not end cleanly
	listing := initialEvents // the initial list is still streaming
	return observe(w, func(ev watch.Event) bool {
		now := time.Now()
		if ev.Type != watch.Error {
			h.heard(now, !listing)
			if listing && ev.Type == watch.Bookmark && isInitialEventsEnd(ev) {
				listing = false
				h.renew(call, now.Add(renewAfter))
			}
			return true
		}
		switch cause := context.Cause(wctx); {
		case errors.Is(cause, errRenew):
			return false // ended on schedule: the watch just closes
		case errors.Is(cause, ErrStalled):
			return true // the watchdog cut it, and reported that
		}
		erred = true
		err := apierrors.FromObject(ev.Object)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			// The API server answered: the position is too old, and the
			// reflector lists again, which is counted as a relist.
			h.heard(now, false)
			return true
		}
		s.onWatchError(ctx, res, ns, err)
		h.failed(now, err)
		return true
	}, func(ranOut bool) {
		defer done()
		if !ranOut || erred || context.Cause(wctx) != nil {
			return // stopped, cut, or its error reported above
		}
		// client-go ends a watch as quietly when its connection is
		// dropped, reset or timed out as when the API server ends it;
		// the transport tells them apart. Ended by the API server, at
		// its timeout or before: the watch worked all along.
		switch clean, err := st.endedCleanly(); {
		case clean:
			h.heard(time.Now(), true)
		case err != nil && ctx.Err() == nil:
			err = fmt.Errorf("source: watch of %s%s broke off: %w", res.Name(), inNamespace(ns), err)
			s.onWatchError(ctx, res, ns, err)
			h.failed(time.Now(), err)
		}
	}), nil
}

// renewAfter is how long after its initial list the source ends a watch
// that streamed it. Soon, so that the next watch, which the API server
// ends after half the stall timeout, is heard from as a healthy one would
// be; but not within a second, which client-go takes for a broken watch,
// and lists again.
const renewAfter = 2 * time.Second

// isInitialEventsEnd reports whether ev is the bookmark that ends the
// initial list streamed by a watch.
func isInitialEventsEnd(ev watch.Event) bool {
	m, err := meta.Accessor(ev.Object)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

// checkWatch opens a watch of res in ns from resourceVersion rv, and
// closes it as soon as the API server has accepted it, so that a resource
// the bridge may list but not watch is refused at start-up.
func (s *Source) checkWatch(ctx context.Context, client apiClient, res Resource, ns, rv string) error {
	o := s.listOptions(0)
	o.ResourceVersion = rv
	o.AllowWatchBookmarks = true
	o.TimeoutSeconds = new(int64(1))
	w, err := client.Watch(withStream(ctx, s.newStream(res, VerbWatch, ns)), o)
	switch {
	case err == nil:
		w.Stop()
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("source: watch %s%s: %w: the bridge may list it but not watch it; grant the watch verb: %v",
			res.Name(), inNamespace(ns), ErrWatchForbidden, err)
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return nil // the watch was accepted; its position was already too old
	default:
		return fmt.Errorf("source: watch %s%s: %w", res.Name(), inNamespace(ns), err)
	}
}
