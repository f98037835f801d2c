package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/kubebus/bridge/checkpoint"
)

// watchMode is how the scripted API server answers a watch.
type watchMode int

const (
	// quiet: a healthy API server with nothing to report. The watch opens,
	// sends bookmarks as kube-apiserver 1.37 was measured to (the first 2
	// minutes after it opened, then every 60s), and is closed by the server
	// at its timeoutSeconds.
	quiet watchMode = iota
	// stuck: the watch opens (a bare HTTP 200) and then nothing comes, not
	// even its end.
	stuck
	// forbidden: every watch is refused with 403.
	forbidden
	// stuckAfterList: a watch that streams the list sends the bookmark
	// that ends the initial events, and then nothing; other watches are
	// stuck.
	stuckAfterList
)

// scriptedAPI is an API server for one resource, in a synctest bubble, whose
// behaviour a test changes as it runs. Lists answer an empty list at once,
// unless listHangs, when they answer nothing until their context ends.
type scriptedAPI struct {
	dynamic.Interface // nil: only Resource is called

	// noWatchList makes the reflector list, rather than stream the list
	// as a watch, as it does with an API server that refuses streaming.
	noWatchList bool

	mu        sync.Mutex
	mode      watchMode
	listHangs bool

	lists, watches atomic.Int64
	// listCuts counts the lists whose context ended by a cut.
	listCuts atomic.Int64
}

func (a *scriptedAPI) set(m watchMode, listHangs bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mode, a.listHangs = m, listHangs
}

func (a *scriptedAPI) now() (watchMode, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mode, a.listHangs
}

func (a *scriptedAPI) IsWatchListSemanticsUnSupported() bool { return a.noWatchList }

func (a *scriptedAPI) Resource(schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return scriptedResource{api: a}
}

type scriptedResource struct {
	dynamic.ResourceInterface // nil: only List and Watch are called
	api                       *scriptedAPI
}

func (r scriptedResource) Namespace(string) dynamic.ResourceInterface { return r }

func (r scriptedResource) List(ctx context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.api.lists.Add(1)
	if _, hangs := r.api.now(); hangs {
		<-ctx.Done()
		if context.Cause(ctx) != ctx.Err() {
			r.api.listCuts.Add(1)
		}
		return nil, ctx.Err()
	}
	l := &unstructured.UnstructuredList{}
	l.SetResourceVersion("10")
	return l, nil
}

func (r scriptedResource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	r.api.watches.Add(1)
	mode, _ := r.api.now()
	if mode == forbidden {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", fmt.Errorf("RBAC: access denied"))
	}
	w := &scriptedWatch{ch: make(chan watch.Event), stop: make(chan struct{})}
	var end <-chan time.Time // a stuck watch never ends
	if mode == quiet && o.TimeoutSeconds != nil {
		end = time.After(time.Duration(*o.TimeoutSeconds) * time.Second)
	}
	go func() {
		defer close(w.ch)
		if (mode == quiet || mode == stuckAfterList) && o.SendInitialEvents != nil && *o.SendInitialEvents {
			// Nothing to list: the bookmark that ends the initial events.
			b := &unstructured.Unstructured{}
			b.SetAPIVersion("v1")
			b.SetKind("ConfigMap")
			b.SetResourceVersion("10")
			b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			w.send(watch.Event{Type: watch.Bookmark, Object: b})
		}
		bookmark := time.NewTimer(2 * time.Minute)
		defer bookmark.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				// As client-go's stream watcher does when its request
				// is cancelled: the read error becomes an Error event.
				w.send(watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(ctx.Err()).ErrStatus})
				return
			case <-end:
				// The server ends the watch at its timeout, as the
				// transport would tell of an HTTP body read to its end.
				if st := streamOf(ctx); st != nil {
					st.ended(io.EOF)
				}
				return
			case <-bookmark.C:
				if mode == quiet && o.AllowWatchBookmarks {
					b := &unstructured.Unstructured{}
					b.SetAPIVersion("v1")
					b.SetKind("ConfigMap")
					b.SetResourceVersion("10")
					w.send(watch.Event{Type: watch.Bookmark, Object: b})
				}
				bookmark.Reset(time.Minute)
			}
		}
	}()
	return w, nil
}

type scriptedWatch struct {
	ch   chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *scriptedWatch) send(ev watch.Event) {
	select {
	case w.ch <- ev:
	case <-w.stop:
	}
}

func (w *scriptedWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *scriptedWatch) ResultChan() <-chan watch.Event { return w.ch }

func init() {
	// client-go's reflector logs every failed watch through klog; these
	// tests fail watches by the hundred.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
}

type emptyLoader struct{}

func (emptyLoader) Load(context.Context, string) (checkpoint.Snapshot, error) {
	return checkpoint.Snapshot{}, nil
}

type watchErrorCount struct {
	noObserver
	n atomic.Int64
}

func (o *watchErrorCount) WatchError(Resource) { o.n.Add(1) }

// healthRun runs a Source of configmaps against api, in a synctest bubble,
// with the default stall timeout.
type healthRun struct {
	t        *testing.T
	api      *scriptedAPI
	src      *Source
	observer *watchErrorCount
	start    time.Time
}

func startHealthRun(t *testing.T, api *scriptedAPI) *healthRun {
	t.Helper()
	obs := &watchErrorCount{}
	src := New(api, Options{Resources: []Resource{configmaps}, Namespaces: []string{"ns"}, Observer: obs},
		emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &healthRun{t: t, api: api, src: src, observer: obs, start: time.Now()}
}

// samples are what Healthy and Watches said, once a second.
type samples struct {
	healthy, unhealthy int
	firstUnhealthy     time.Duration // since the run started; 0: never
	lastUnhealthy      time.Duration
	// healthyAfterFirstUnhealthy counts the healthy samples after the
	// first unhealthy one.
	healthyAfterFirstUnhealthy int
	// flips counts changes between healthy and unhealthy.
	flips int
	// maxSilence is the longest LastContact age seen.
	maxSilence time.Duration
	lastErr    error
}

// unhealthyThroughout fails the test unless the watch was reported
// unhealthy within the stall timeout (and a tick), and never healthy
// after that.
func (s samples) unhealthyThroughout(t *testing.T) {
	t.Helper()
	if s.firstUnhealthy == 0 || s.firstUnhealthy > DefaultStallTimeout+2*time.Second {
		t.Errorf("first reported unhealthy after %s, want within the stall timeout %s and a tick", s.firstUnhealthy, DefaultStallTimeout)
	}
	if s.healthyAfterFirstUnhealthy != 0 {
		t.Errorf("healthy in %d of the %d samples after it was first reported unhealthy (%d flips); want unhealthy throughout",
			s.healthyAfterFirstUnhealthy, s.healthyAfterFirstUnhealthy+s.unhealthy, s.flips)
	}
}

// sample reads the health once a second for d, half a second off the
// watchdog's ticks. Healthy (what Readiness asks) and Watches (what the
// gauges read) must agree at every sample.
func (r *healthRun) sample(d time.Duration) samples {
	r.t.Helper()
	var s samples
	was := r.src.Healthy() == nil
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		now := time.Now()
		err := r.src.Healthy()
		sts := r.src.Watches()
		if len(sts) != 1 || (sts[0].Err == nil) != (err == nil) {
			r.t.Fatalf("Healthy says %v, Watches %+v", err, sts)
		}
		r.maxSilence(&s, now.Sub(sts[0].LastContact))
		at := now.Sub(r.start)
		if err == nil {
			s.healthy++
			if s.firstUnhealthy != 0 {
				s.healthyAfterFirstUnhealthy++
			}
		} else {
			s.unhealthy++
			s.lastErr = err
			s.lastUnhealthy = at
			if s.firstUnhealthy == 0 {
				s.firstUnhealthy = at
			}
		}
		if (err == nil) != was {
			s.flips++
			was = err == nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return s
}

func (r *healthRun) maxSilence(s *samples, age time.Duration) { s.maxSilence = max(s.maxSilence, age) }

// forEachListPath runs test in a synctest bubble, once with the list
// streamed as a watch (whose watch the source renews itself) and once with
// lists, as with an API server that refuses streaming.
func forEachListPath(t *testing.T, test func(t *testing.T, noWatchList bool)) {
	for _, tc := range []struct {
		name        string
		noWatchList bool
	}{{"streamed list", false}, {"list", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { test(t, tc.noWatchList) })
		})
	}
}

// A healthy resource with nothing to report: over an hour of reopened
// watches (bookmarks come too late to matter: the server ends each watch
// at half the stall timeout, a minute), the watch is never reported
// unhealthy, so neither Readiness nor bridge_watch_healthy flaps, and
// nothing is cut.
func TestHealthQuietWatchStaysHealthy(t *testing.T) {
	forEachListPath(t, func(t *testing.T, noWatchList bool) {
		r := startHealthRun(t, &scriptedAPI{mode: quiet, noWatchList: noWatchList})
		s := r.sample(time.Hour)
		if s.unhealthy != 0 {
			t.Errorf("unhealthy in %d of %d samples, first after %s: %v", s.unhealthy, s.healthy+s.unhealthy, s.firstUnhealthy, s.lastErr)
		}
		if w := r.api.watches.Load(); w < 55 {
			t.Errorf("%d watches in an hour, want one a minute", w)
		}
		if n := r.observer.n.Load(); n != 0 {
			t.Errorf("%d watch errors counted, want none", n)
		}
		if s.maxSilence > DefaultStallTimeout/2+5*time.Second {
			t.Errorf("last contact up to %s old, want within half the stall timeout", s.maxSilence)
		}
		t.Logf("an hour: %d watches, %d lists, last contact at most %s old", r.api.watches.Load(), r.api.lists.Load(), s.maxSilence)
	})
}

// Issue 11, point 6: a watch that the API server opens (HTTP 200) but on
// which nothing ever comes. It is reported unhealthy within the stall
// timeout (and a tick), and stays unhealthy: reopening it again, which the
// API server answers with another bare 200, is no sign of life.
func TestHealthWatchThatNeverDeliversStaysUnhealthy(t *testing.T) {
	forEachListPath(t, func(t *testing.T, noWatchList bool) {
		r := startHealthRun(t, &scriptedAPI{mode: stuck, noWatchList: noWatchList})
		s := r.sample(time.Hour)
		s.unhealthyThroughout(t)
		if n := r.observer.n.Load(); n < 20 {
			t.Errorf("%d watch errors counted in an hour, want every cut counted (one every stall timeout or so)", n)
		}
		t.Logf("an hour: first unhealthy after %s, %d unhealthy samples, %d watches, %d lists, %d errors counted: %v",
			s.firstUnhealthy, s.unhealthy, r.api.watches.Load(), r.api.lists.Load(), r.observer.n.Load(), s.lastErr)
	})
}

// A watch refused with 403 (a revoked permission) while lists still work:
// unhealthy once it kept failing for the stall timeout, and it stays so.
func TestHealthFailingWatchStaysUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startHealthRun(t, &scriptedAPI{mode: forbidden})
		s := r.sample(30 * time.Minute)
		// The first refusal comes right after the first list; the report
		// when it has lasted the stall timeout, at the next tick.
		if s.firstUnhealthy == 0 || s.firstUnhealthy > DefaultStallTimeout+2*time.Second {
			t.Errorf("first reported unhealthy after %s, want within the stall timeout %s", s.firstUnhealthy, DefaultStallTimeout)
		}
		if s.healthyAfterFirstUnhealthy != 0 {
			t.Errorf("healthy in %d samples after it was first reported unhealthy; want unhealthy throughout", s.healthyAfterFirstUnhealthy)
		}
		if s.lastErr == nil || !apierrors.IsForbidden(s.lastErr) {
			t.Errorf("reported %v, want the 403", s.lastErr)
		}
	})
}

// Recovery: a watch stuck for ten minutes, then an API server that works
// again. Healthy again within 1.5 stall timeouts and client-go's backoff (up
// to 30s), and healthy from then on.
func TestHealthRecoversWhenTheWatchWorksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startHealthRun(t, &scriptedAPI{mode: stuck})
		if s := r.sample(10 * time.Minute); s.unhealthy == 0 {
			t.Fatal("never unhealthy while stuck")
		}
		r.api.set(quiet, false)
		fixed := time.Since(r.start)
		s := r.sample(30 * time.Minute)
		if s.lastUnhealthy-fixed > 3*DefaultStallTimeout/2+time.Minute {
			t.Errorf("unhealthy until %s after the API server worked again, want healthy within 1.5 stall timeouts and the backoff", s.lastUnhealthy-fixed)
		}
		if s.flips > 1 {
			t.Errorf("%d changes of health after the API server worked again, want one: %v", s.flips, s.lastErr)
		}
		t.Logf("healthy again %s after the API server worked again", max(0, s.lastUnhealthy-fixed))
	})
}

// Issue 11, point 6: a list that the API server never answers (the path
// a reflector takes whenever the list is not streamed as a watch) is cut
// when it had no answer for the stall timeout, counted, and retried; once
// the API server answers, the watch is healthy again.
func TestHealthHungListIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startHealthRun(t, &scriptedAPI{mode: quiet, listHangs: true, noWatchList: true})
		s := r.sample(10 * time.Minute)
		if s.firstUnhealthy == 0 || s.firstUnhealthy > DefaultStallTimeout+2*time.Second {
			t.Errorf("first reported unhealthy after %s, want within the stall timeout %s", s.firstUnhealthy, DefaultStallTimeout)
		}
		if n := r.api.listCuts.Load(); n < 2 {
			t.Errorf("%d of %d hung lists cut in 10 minutes, want the hung ones cut and retried", n, r.api.lists.Load())
		}
		if n := r.observer.n.Load(); n < r.api.listCuts.Load() {
			t.Errorf("%d watch errors counted for %d cut lists", n, r.api.listCuts.Load())
		}
		r.api.set(quiet, false)
		fixed := time.Since(r.start)
		s = r.sample(20 * time.Minute)
		if s.lastUnhealthy-fixed > 2*DefaultStallTimeout+time.Minute {
			t.Errorf("unhealthy until %s after the lists were answered", s.lastUnhealthy-fixed)
		}
		if s.flips > 1 {
			t.Errorf("%d changes of health after the lists were answered, want one", s.flips)
		}
		t.Logf("%d lists, %d cut; healthy again %s after the lists were answered", r.api.lists.Load(), r.api.listCuts.Load(), s.lastUnhealthy-fixed)
	})
}

// Issue 11, point 6: the API server streams the list (its initial events
// and the bookmark that ends them) and then its watches hang. The streamed
// list is an answer, not a working watch, and the source's scheduled end
// of that watch is no answer at all: the watch is reported unhealthy within
// the stall timeout and stays so, though each relist streams again.
func TestHealthWatchThatHangsAfterStreamedListStaysUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startHealthRun(t, &scriptedAPI{mode: stuckAfterList})
		s := r.sample(time.Hour)
		s.unhealthyThroughout(t)
		t.Logf("an hour: first unhealthy after %s, %d unhealthy samples, %d watches, %d lists: %v",
			s.firstUnhealthy, s.unhealthy, r.api.watches.Load(), r.api.lists.Load(), s.lastErr)
	})
}

// TestHealthHeldReflectorIsNotSilent checks that while the reflector is in
// a call into its store (held by its Handler, say), the watch it cannot
// read is neither cut nor reported stalled, however long the call takes;
// once the call ends, silence is counted from then.
func TestHealthHeldReflectorIsNotSilent(t *testing.T) {
	const timeout = 2 * time.Second
	t0 := time.Now()
	h := newHealth(Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}, "", timeout, t0, func(error) {})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var cut error
	_, done := h.watching(t0, func(err error) { cut = err })
	defer done()

	h.holding(true, t0.Add(time.Second))
	h.check(t0.Add(10*timeout), log)
	if cut != nil {
		t.Fatalf("a watch whose reflector was held was cut: %v", cut)
	}
	if st := h.status(t0.Add(10 * timeout)); st.Err != nil {
		t.Fatalf("a watch whose reflector was held is reported: %v", st.Err)
	}

	released := t0.Add(10 * timeout)
	h.holding(false, released)
	if st := h.status(released.Add(timeout / 2)); st.Err != nil {
		t.Fatalf("reported %s after the hold ended, within the stall timeout: %v", timeout/2, st.Err)
	}
	late := released.Add(2 * timeout)
	if st := h.status(late); st.Err == nil {
		t.Errorf("not reported %s after the hold ended with nothing heard", 2*timeout)
	}
	h.check(late, log)
	if cut == nil {
		t.Errorf("not cut %s after the hold ended with nothing heard", 2*timeout)
	}
}
