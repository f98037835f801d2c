package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrStalled is the cause given to a call the source cuts because the API
// server sent nothing on it: a watch silent for longer than
// Options.StallTimeout, or a list whose answer made no progress for that
// long (and at least minListPatience).
var ErrStalled = errors.New("no answer from the API server")

// WatchStatus is what the source knows of one reflector's contact with
// the API server: one resource, in one namespace ("" for all).
type WatchStatus struct {
	Resource  Resource
	Namespace string
	// LastContact is when the API server last answered this reflector:
	// an event or bookmark arrived, a list's answer arrived or made
	// progress, the API server ended a watch, or a call was refused with
	// an error. A watch that merely opened is no answer: a stuck server or
	// proxy opens them too; nor is one whose connection was dropped.
	LastContact time.Time
	// Err is nil while the watch is healthy. Otherwise it says why not:
	// nothing heard for longer than the stall timeout, or calls failing
	// (or cut for no answer) for longer than that.
	Err error
}

// health follows one reflector's contact with the API server. Its methods
// are called from the reflector's goroutines and from the watchdog.
//
// Only a watch that delivers proves that the watch works: an event, a
// bookmark, or an end by the API server (its body read to the end: see
// stream.go). An opened watch proves nothing, since an API server whose
// watches are stuck, or a proxy, open them just as well; nor does a watch
// whose connection was dropped, reset or timed out, nor one the source
// ended itself. A list, streamed as a watch or not, proves that the API
// server answers, not that its watches do.
type health struct {
	res     Resource
	ns      string
	timeout time.Duration

	mu      sync.Mutex
	contact time.Time
	// held counts the reflector's calls into its store going on (see
	// store.busy): while one goes on, the reflector reads nothing, and
	// silence says nothing of the API server.
	held int
	// failingSince is when the watch started failing: the first failed
	// call, or, for a call cut for silence, when the silence began; zero
	// while watches work. Only a watch that delivers clears it, so a watch
	// that fails or goes silent after every list stays unhealthy.
	failingSince time.Time
	lastErr      error
	// watch is the watch call in flight, so that a silent one can be cut.
	watch *watchCall
	// list is the list call in flight, so that one unanswered for
	// listPatience can be cut.
	list         *listCall
	listPatience time.Duration
	// reported is the error last logged, so that each change is logged
	// once.
	reported error
	// onCut is told of each call the watchdog cuts; the errors that the
	// cut then causes in the reflector's calls are not reported again.
	onCut func(error)
}

type watchCall struct {
	started time.Time
	cancel  context.CancelCauseFunc
	// renewAt, when set, is when the source ends this watch itself, so
	// that the reflector opens the next one: a watch that streamed the
	// initial list has the reflector's long timeout, which the source
	// could not shorten (see Source.watch).
	renewAt time.Time
}

type listCall struct {
	cancel context.CancelCauseFunc
	st     *stream
	// progressAt is when the call last made progress, as the watchdog
	// saw it: when it started, a request for it was sent, or its answer
	// arrived in part. attempts and reads are the stream's counts then.
	progressAt      time.Time
	attempts, reads int64
}

// minListPatience is the least time a list may go without progress (a
// request sent, its headers, or any of its body) before it is cut. A
// working API server answers a list within its request timeout
// (--request-timeout, a minute by default), answering 504 itself past it,
// and then sends its body as fast as it can; so a list with no progress
// for longer than both that and the stall timeout is hung, not slow, and
// cutting it never cuts a working server's list again and again.
const minListPatience = time.Minute

// errRenew is the cause given to a watch the source ends on schedule.
var errRenew = errors.New("source: watch renewed")

func newHealth(res Resource, ns string, timeout time.Duration, now time.Time, onCut func(error)) *health {
	return &health{res: res, ns: ns, timeout: timeout, contact: now, listPatience: max(timeout, minListPatience), onCut: onCut}
}

// heard records an answer from the API server. watchWorks is true for a
// watch event or bookmark, or a watch that ended at its timeout, which
// prove that the watch works.
func (h *health) heard(now time.Time, watchWorks bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.contact = now
	if watchWorks {
		h.failingSince, h.lastErr = time.Time{}, nil
	}
}

// holding records that the reflector began a call into its store (on),
// or ended one. Once none goes on, silence is counted from then: the API
// server could not be heard while nothing read its answers.
func (h *health) holding(on bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.held++
		return
	}
	h.held--
	h.contact = later(h.contact, now)
}

// failed records a failed list or watch, or a watch ended by an error. An
// error the API server answered with (Forbidden, for example) is contact
// too: the server is there, and the reason to report is the error.
func (h *health) failed(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		h.failingSince = now
	}
	h.lastErr = err
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		h.contact = now
	}
}

// watching registers a watch call in flight; done ends the registration
// and releases the call's context.
func (h *health) watching(now time.Time, cancel context.CancelCauseFunc) (c *watchCall, done func()) {
	c = &watchCall{started: now, cancel: cancel}
	h.mu.Lock()
	h.watch = c
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		if h.watch == c {
			h.watch = nil
		}
		h.mu.Unlock()
		cancel(context.Canceled)
	}
}

// listing registers a list call in flight, whose transport reports to st;
// done ends the registration and releases the call's context.
func (h *health) listing(now time.Time, cancel context.CancelCauseFunc, st *stream) (done func()) {
	c := &listCall{progressAt: now, cancel: cancel, st: st}
	h.mu.Lock()
	h.list = c
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		if h.list == c {
			h.list = nil
		}
		h.mu.Unlock()
		cancel(context.Canceled)
	}
}

// renew has the source end the watch call c at t.
func (h *health) renew(c *watchCall, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.renewAt = t
}

// status is the watch's state at now.
func (h *health) status(now time.Time) WatchStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.statusLocked(now)
}

func (h *health) statusLocked(now time.Time) WatchStatus {
	st := WatchStatus{Resource: h.res, Namespace: h.ns, LastContact: h.contact}
	where := h.res.Name() + inNamespace(h.ns)
	switch silent := now.Sub(h.contact); {
	case !h.failingSince.IsZero() && now.Sub(h.failingSince) > h.timeout:
		st.Err = fmt.Errorf("source: watch of %s failing for %s: %w", where, round(now.Sub(h.failingSince)), h.lastErr)
	case silent > h.timeout && h.held == 0:
		st.Err = fmt.Errorf("source: watch of %s: %w for %s", where, ErrStalled, round(silent))
	}
	return st
}

// check cuts a call that has heard nothing for too long, so that the
// reflector tries again: a watch with no answer for longer than the
// timeout, or a list with no progress for longer than listPatience. A hung
// connection is thus abandoned in bounded time, whatever the protocol; a
// list whose answer keeps arriving, however slowly, is left to finish. It
// also ends a watch due for renewal, and logs each change of the watch's
// health.
func (h *health) check(now time.Time, log *slog.Logger) {
	h.mu.Lock()
	var cuts []error
	if c := h.watch; c != nil {
		switch silentSince := later(c.started, h.contact); {
		case !c.renewAt.IsZero() && now.After(c.renewAt):
			// The source ends this watch on schedule. That is no word
			// from the API server: the next watch must prove itself.
			c.cancel(errRenew)
			h.watch = nil
		case h.held > 0:
			// Not read, not silent: the reflector is busy handing on
			// (the pipeline may hold it while it waits for the bus), and
			// the watch is read again once it is done.
		case now.Sub(silentSince) > h.timeout:
			cut := fmt.Errorf("source: watch of %s%s cut: %w for %s", h.res.Name(), inNamespace(h.ns), ErrStalled, round(now.Sub(silentSince)))
			c.cancel(cut)
			h.watch = nil
			h.failLocked(silentSince, cut)
			cuts = append(cuts, cut)
		}
	}
	if c := h.list; c != nil {
		// Each request sent for the call (client-go retries within it)
		// starts its patience anew; each part of an answer is contact.
		if a, r := c.st.attempts.Load(), c.st.reads.Load(); a != c.attempts || r != c.reads {
			if r != c.reads {
				h.contact = now
			}
			c.attempts, c.reads, c.progressAt = a, r, now
		}
		if now.Sub(c.progressAt) > h.listPatience {
			cut := fmt.Errorf("source: list of %s%s cut: %w for %s", h.res.Name(), inNamespace(h.ns), ErrStalled, round(now.Sub(c.progressAt)))
			c.cancel(cut)
			h.list = nil
			h.failLocked(c.progressAt, cut)
			cuts = append(cuts, cut)
		}
	}
	st := h.statusLocked(now)
	was := h.reported
	h.reported = st.Err
	h.mu.Unlock()

	if h.onCut != nil {
		for _, cut := range cuts {
			h.onCut(cut)
		}
	}

	switch {
	case st.Err != nil && was == nil:
		log.Warn("watch unhealthy: changes to this resource are not seen until it recovers",
			"resource", h.res.Name(), "namespace", h.ns, "lastContact", st.LastContact, "err", st.Err)
	case st.Err == nil && was != nil:
		log.Info("watch healthy again", "resource", h.res.Name(), "namespace", h.ns)
	}
}

// failLocked records a call cut for silence since since: the watch has
// been failing since then, so that it stays unhealthy after the cut until
// a watch delivers, even if a list answers in between.
func (h *health) failLocked(since time.Time, err error) {
	if h.failingSince.IsZero() || since.Before(h.failingSince) {
		h.failingSince = since
	}
	h.lastErr = err
}

// watchdog checks every reflector's health until ctx ends.
func watchdog(ctx context.Context, hs []*health, timeout time.Duration, log *slog.Logger) {
	// Ten checks per timeout report a stall within a tenth of it; a
	// second is often enough for any timeout worth having.
	tick := min(timeout/10, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, h := range hs {
				h.check(now, log)
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
