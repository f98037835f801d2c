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

// ErrStalled is the cause given to a watch the source cuts because the API
// server sent nothing on it for longer than Options.StallTimeout.
var ErrStalled = errors.New("no answer from the API server")

// WatchStatus is what the source knows of one reflector's contact with
// the API server: one resource, in one namespace ("" for all).
type WatchStatus struct {
	Resource  Resource
	Namespace string
	// LastContact is when the API server last answered this reflector: a
	// watch opened, an event or bookmark arrived, or a list returned.
	LastContact time.Time
	// Err is nil while the watch is healthy. Otherwise it says why not:
	// nothing heard for longer than the stall timeout, or calls failing
	// for longer than that.
	Err error
}

// health follows one reflector's contact with the API server. Its methods
// are called from the reflector's goroutines and from the watchdog.
type health struct {
	res     Resource
	ns      string
	timeout time.Duration

	mu      sync.Mutex
	contact time.Time
	// failingSince is the first failure since a watch last opened or
	// delivered an event; zero while watches work. A list that works does
	// not clear it: a watch that fails after every list is a failure.
	failingSince time.Time
	lastErr      error
	// watch is the watch call in flight, so that a silent one can be cut.
	watch *watchCall
	// reported is the error last logged, so that each change is logged
	// once.
	reported error
	// onCut is told of each watch the watchdog cuts; the errors that the
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

// errRenew is the cause given to a watch the source ends on schedule.
var errRenew = errors.New("source: watch renewed")

func newHealth(res Resource, ns string, timeout time.Duration, now time.Time, onCut func(error)) *health {
	return &health{res: res, ns: ns, timeout: timeout, contact: now, onCut: onCut}
}

// heard records an answer from the API server. watchWorks is true for an
// opened watch or a watch event, which prove that the watch works.
func (h *health) heard(now time.Time, watchWorks bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.contact = now
	if watchWorks {
		h.failingSince, h.lastErr = time.Time{}, nil
	}
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
	case silent > h.timeout:
		st.Err = fmt.Errorf("source: watch of %s: %w for %s", where, ErrStalled, round(silent))
	}
	return st
}

// check cuts a watch call that has heard nothing for longer than the
// timeout, so that the reflector opens a new one (a hung connection is
// abandoned in bounded time, whatever the protocol), and logs each change
// of the watch's health.
func (h *health) check(now time.Time, log *slog.Logger) {
	h.mu.Lock()
	var cut error
	if c := h.watch; c != nil && !c.renewAt.IsZero() && now.After(c.renewAt) {
		c.cancel(errRenew)
		h.watch = nil
	} else if c != nil && now.Sub(later(c.started, h.contact)) > h.timeout {
		cut = fmt.Errorf("source: watch of %s%s cut: %w for %s", h.res.Name(), inNamespace(h.ns), ErrStalled, round(now.Sub(later(c.started, h.contact))))
		c.cancel(cut)
		h.watch = nil
		if h.failingSince.IsZero() {
			h.failingSince = now
		}
		h.lastErr = cut
	}
	st := h.statusLocked(now)
	was := h.reported
	h.reported = st.Err
	h.mu.Unlock()

	if cut != nil && h.onCut != nil {
		h.onCut(cut)
	}

	switch {
	case st.Err != nil && was == nil:
		log.Warn("watch unhealthy: changes to this resource are not seen until it recovers",
			"resource", h.res.Name(), "namespace", h.ns, "lastContact", st.LastContact, "err", st.Err)
	case st.Err == nil && was != nil:
		log.Info("watch healthy again", "resource", h.res.Name(), "namespace", h.ns)
	}
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
