package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// ErrNotServed is wrapped by Run's error when the API server no longer
// serves a watched resource at the version resolved at start-up.
var ErrNotServed = errors.New("resource not served at the version watched")

// NotServedError says that the API server stopped serving a watched
// resource at the version the bridge resolved at start-up: its CRD was
// deleted, or recreated or changed to serve other versions. The source
// cannot follow it there by itself; a restart resolves the resource again.
type NotServedError struct {
	// Resource is the resource as it was watched: its Version is the one
	// no longer served.
	Resource Resource
	// Served are the versions the resource is served at now, preferred
	// first; none when it is served at no version.
	Served []string
	// For is how long it had not been served at Resource.Version.
	For time.Duration
}

func (e *NotServedError) Error() string {
	if len(e.Served) == 0 {
		return fmt.Sprintf("source: %s is no longer served at %s nor at any other version (for %s): was its CRD deleted? a restart fails until it is served again",
			e.Resource.Name(), e.Resource.Version, e.For.Round(time.Second))
	}
	return fmt.Sprintf("source: %s is served at %s now, no longer at %s, the version resolved at start-up: a restart resolves it again",
		e.Resource.Name(), strings.Join(e.Served, ", "), e.Resource.Version)
}

func (e *NotServedError) Unwrap() error { return ErrNotServed }

// ServedObserver is told whether each watched resource is served at the
// version watched, when Options.Observer implements it. Its method must
// not block.
type ServedObserver interface {
	Served(res Resource, served bool)
}

// servedTiming bounds how a resource that the API server does not find is
// checked with discovery.
type servedTiming struct {
	// confirmEvery is the time between checks while the resource is
	// served at another version only.
	confirmEvery time.Duration
	// confirmations is how many checks in a row must find it served at
	// the same other version before Run stops.
	confirmations int
	// pollEvery is the time between checks while it is served at no
	// version.
	pollEvery time.Duration
	// giveUp is how long a resource served at no version is waited for
	// before Run stops.
	giveUp time.Duration
	// warnEvery spaces the warnings while it is not served.
	warnEvery time.Duration
}

var defaultServedTiming = servedTiming{
	// Three checks over two seconds: a CRD's versions reach discovery all
	// at once, so a version change seen three times is not a lag of
	// discovery, and the exit comes seconds after the change.
	confirmEvery:  time.Second,
	confirmations: 3,
	// Each check fetches discovery again: one or two requests, every few
	// seconds while the resource is gone.
	pollEvery: 5 * time.Second,
	// Long enough for a CRD to be deleted and created again (an operator
	// reinstalled) without a restart; short enough that a resource that
	// is gone for good becomes a restart, and then a start-up that fails
	// naming it, within minutes.
	giveUp:    5 * time.Minute,
	warnEvery: 30 * time.Second,
}

// servedState follows what discovery says of a resource after the API
// server did not find it at the version watched.
type servedState struct {
	res    Resource
	timing servedTiming
	// since is when a check first found the resource not served at its
	// version.
	since time.Time
	// other is the version found by the checks before, and seen how many
	// of them in a row found it.
	other string
	seen  int
}

// servedStep is what to do after a check.
type servedStep struct {
	// served is true when the resource is served at its version: the
	// reflector's retries will find it.
	served bool
	// err, when set, is what Run returns.
	err error
	// next is when to check again, when neither served nor err is set.
	next time.Duration
}

// observe takes the versions a check found the resource served at,
// preferred first, at now.
func (st *servedState) observe(versions []string, now time.Time) servedStep {
	if slices.Contains(versions, st.res.Version) {
		*st = servedState{res: st.res, timing: st.timing}
		return servedStep{served: true}
	}
	if st.since.IsZero() {
		st.since = now
	}
	notServed := &NotServedError{Resource: st.res, Served: versions, For: now.Sub(st.since)}
	if len(versions) == 0 {
		st.other, st.seen = "", 0
		if notServed.For >= st.timing.giveUp {
			return servedStep{err: notServed}
		}
		return servedStep{next: min(st.timing.pollEvery, st.timing.giveUp-notServed.For)}
	}
	if versions[0] == st.other {
		st.seen++
	} else {
		st.other, st.seen = versions[0], 1
	}
	if st.seen >= st.timing.confirmations {
		return servedStep{err: notServed}
	}
	return servedStep{next: st.timing.confirmEvery}
}

// servedCheck checks one resource with discovery each time a list or
// watch of it is answered NotFound, and stops the source when the
// resource is no longer served at its version.
type servedCheck struct {
	res      Resource
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	timing   servedTiming
	observer ServedObserver
	log      *slog.Logger
	// notFound holds one pending NotFound: more while a check runs add
	// nothing.
	notFound chan struct{}
}

func (c *servedCheck) poke() {
	select {
	case c.notFound <- struct{}{}:
	default:
	}
}

// run returns nil when ctx ends, or the error to stop the source with.
func (c *servedCheck) run(ctx context.Context) error {
	c.observer.Served(c.res, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.notFound:
		}
		if err := c.untilServed(ctx); err != nil {
			return err
		}
	}
}

// untilServed checks discovery until the resource is served at its
// version again (nil), ctx ends (nil), or the source must stop.
func (c *servedCheck) untilServed(ctx context.Context) error {
	st := servedState{res: c.res, timing: c.timing}
	var warned, failed time.Time
	for {
		versions, err := c.versions(ctx)
		if ctx.Err() != nil {
			return nil
		}
		step := servedStep{next: c.timing.pollEvery}
		if err != nil {
			if time.Since(failed) >= c.timing.warnEvery {
				failed = time.Now()
				c.log.Warn("cannot tell whether the resource is still served: discovery failed; retrying", "resource", c.res.Name(), "err", err)
			}
		} else {
			step = st.observe(versions, time.Now())
		}
		switch {
		case step.err != nil:
			c.log.Error("resource not served at the version watched: stopping", "resource", c.res.Name(),
				"version", c.res.Version, "servedAt", versions, "err", step.err)
			return step.err
		case step.served:
			if !warned.IsZero() {
				c.log.Info("resource served again at the version watched", "resource", c.res.Name(), "version", c.res.Version)
				c.observer.Served(c.res, true)
			}
			return nil
		case err == nil && time.Since(warned) >= c.timing.warnEvery:
			if warned.IsZero() {
				c.observer.Served(c.res, false)
			}
			warned = time.Now()
			c.log.Warn("resource not served at the version watched; the bridge stops if it stays so", "resource", c.res.Name(),
				"version", c.res.Version, "servedAt", versions, "for", time.Since(st.since).Round(time.Second).String(),
				"stopsAfter", c.stopsAfter(versions).String())
		}
		t := time.NewTimer(step.next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// stopsAfter says how long a resource served at versions is waited for.
func (c *servedCheck) stopsAfter(versions []string) time.Duration {
	if len(versions) == 0 {
		return c.timing.giveUp
	}
	return time.Duration(c.timing.confirmations-1) * c.timing.confirmEvery
}

// versions asks discovery, afresh, which versions the resource is served
// at, preferred first.
func (c *servedCheck) versions(ctx context.Context) ([]string, error) {
	c.mapper.ResetWithContext(ctx)
	gvrs, err := c.mapper.ResourcesForWithContext(ctx, schema.GroupVersionResource{Group: c.res.Group, Resource: c.res.Resource})
	if err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("source: discover %s: %w", c.res.Name(), err)
	}
	var versions []string
	for _, gvr := range gvrs {
		if gvr.GroupResource() == c.res.GroupResource() && !slices.Contains(versions, gvr.Version) {
			versions = append(versions, gvr.Version)
		}
	}
	return versions, nil
}

// servedChecks are the running checks of a source, one per resource.
type servedChecks map[schema.GroupVersionResource]*servedCheck

// startServedChecks starts a check per resource on wg. A check that finds
// a resource no longer served at its version calls stop with its error.
// Without a discovery client nothing is checked.
func (s *Source) startServedChecks(ctx context.Context, stop context.CancelCauseFunc, wg *sync.WaitGroup) servedChecks {
	if s.opts.Discovery == nil {
		return nil
	}
	observer, ok := s.opts.Observer.(ServedObserver)
	if !ok {
		observer = noServedObserver{}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapperWithContext(memory.NewMemCacheClientWithContext(s.opts.Discovery))
	checks := servedChecks{}
	for _, res := range s.opts.Resources {
		c := &servedCheck{res: res, mapper: mapper, timing: defaultServedTiming, observer: observer,
			log: s.log, notFound: make(chan struct{}, 1)}
		checks[res.GroupVersionResource] = c
		wg.Go(func() {
			defer utilruntime.HandleCrash()
			if err := c.run(ctx); err != nil {
				stop(err)
			}
		})
	}
	return checks
}

// listWatch returns lw, telling res's check of every NotFound it is
// answered.
func (cs servedChecks) listWatch(res Resource, lw cache.ListerWatcher) cache.ListerWatcher {
	c, ok := cs[res.GroupVersionResource]
	if !ok {
		return lw
	}
	return &notFoundListWatch{ListerWatcher: lw, withContext: cache.ToListerWatcherWithContext(lw), check: c}
}

// notServed is the error Run returns when its context ended: the check's
// error when a check stopped it, else nil.
func notServed(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, ErrNotServed) {
		return err
	}
	return nil
}

// notFoundListWatch is a ListerWatcher that pokes a check whenever a list
// or watch is answered NotFound, which is what the API server answers for
// a resource it does not serve.
type notFoundListWatch struct {
	cache.ListerWatcher
	withContext cache.ListerWatcherWithContext
	check       *servedCheck
}

var _ cache.ListerWatcherWithContext = (*notFoundListWatch)(nil)

func (w *notFoundListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	obj, err := w.withContext.ListWithContext(ctx, o)
	if apierrors.IsNotFound(err) {
		w.check.poke()
	}
	return obj, err
}

func (w *notFoundListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	wi, err := w.withContext.WatchWithContext(ctx, o)
	if apierrors.IsNotFound(err) {
		w.check.poke()
	}
	return wi, err
}

// IsWatchListSemanticsUnSupported passes on what the wrapped ListerWatcher
// says, so that the reflector streams its lists when it would have.
func (w *notFoundListWatch) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(w.ListerWatcher)
}

type noServedObserver struct{}

func (noServedObserver) Served(Resource, bool) {}
