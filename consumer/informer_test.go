package consumer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/test/poll"
)

// seen is an object's identity and API resourceVersion as a handler got it.
type seen struct {
	uid string
	rv  int
}

func (s seen) String() string { return s.uid + "@" + strconv.Itoa(s.rv) }

func seenOf(o obj) seen { return seen{uid: o.uid, rv: o.rv} }

// checker is an informer's event handler that records what an informer's
// handlers must never see: an object going backwards, an add of an object
// already there, an update of another uid, a delete of an object never
// added.
type checker struct {
	mu       sync.Mutex
	held     map[string]seen
	problems []string
	events   int
}

func newChecker() *checker { return &checker{held: map[string]seen{}} }

func identity(o any) (string, seen) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u := o.(*unstructured.Unstructured)
	rv, _ := strconv.Atoi(u.GetAnnotations()[AnnotationResourceVersion])
	return objectKey(u.GetNamespace(), u.GetName()), seen{uid: string(u.GetUID()), rv: rv}
}

func (c *checker) OnAdd(o any, _ bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	k, s := identity(o)
	if old, ok := c.held[k]; ok {
		c.problems = append(c.problems, fmt.Sprintf("add of %s %s while %s held", k, s, old))
	}
	c.held[k] = s
}

func (c *checker) OnUpdate(_, n any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	k, s := identity(n)
	old, ok := c.held[k]
	switch {
	case !ok:
		c.problems = append(c.problems, fmt.Sprintf("update of %s %s never added", k, s))
	case old.uid != s.uid:
		c.problems = append(c.problems, fmt.Sprintf("update of %s from %s to another uid %s", k, old, s))
	case s.rv < old.rv:
		c.problems = append(c.problems, fmt.Sprintf("%s went backwards from %s to %s", k, old, s))
	}
	c.held[k] = s
}

func (c *checker) OnDelete(o any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	k, s := identity(o)
	if _, ok := c.held[k]; !ok {
		c.problems = append(c.problems, fmt.Sprintf("delete of %s %s never added", k, s))
	}
	delete(c.held, k)
}

func (c *checker) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.problems {
		t.Error("handler saw:", p)
	}
}

func (c *checker) state() map[string]seen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.held)
}

// runInformer runs a shared informer on lw with a checker; stop ends it
// and waits for it.
func runInformer(t *testing.T, lw cache.ListerWatcher, resync time.Duration) (cache.SharedIndexInformer, *checker, func()) {
	t.Helper()
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, resync, cache.Indexers{})
	c := newChecker()
	if _, err := inf.AddEventHandlerWithResyncPeriod(c, resync); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf, c, stop
}

// cacheState is the informer's lister content, keyed as the informer
// keys it.
func cacheState(inf cache.SharedIndexInformer) map[string]seen {
	out := map[string]seen{}
	for _, o := range inf.GetStore().List() {
		k, s := identity(o)
		out[k] = s
	}
	return out
}

// converges waits until the informer's lister and its handlers' view both
// equal want.
func converges(t *testing.T, inf cache.SharedIndexInformer, c *checker, want map[string]seen) {
	t.Helper()
	poll.UntilNil(t, 10*time.Second, func() error {
		if got := cacheState(inf); !maps.Equal(got, want) {
			return fmt.Errorf("lister holds %v, want %v", sorted(got), sorted(want))
		}
		if got := c.state(); !maps.Equal(got, want) {
			return fmt.Errorf("handlers saw %v, want %v", sorted(got), sorted(want))
		}
		return nil
	})
	c.check(t)
}

func sorted(m map[string]seen) []string {
	var s []string
	for k, v := range m {
		s = append(s, k+"="+v.String())
	}
	slices.Sort(s)
	return s
}

func newLW(t *testing.T, log Log, opts Options) *ListerWatcher {
	t.Helper()
	lw, err := NewListerWatcher(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lw.Close() })
	return lw
}

func cm(name, uid string, rv int, lbl ...string) obj {
	o := obj{ns: "ns", name: name, uid: "00000000-0000-0000-0000-" + fmt.Sprintf("%012s", uid), rv: rv}
	if len(lbl) > 0 {
		o.labels = map[string]string{"app": lbl[0]}
	}
	return o
}

// TestInformerOnBus runs a real SharedIndexInformer (resync on) on a
// Log that carries repeats, older states, a recreated object, a label
// selector's entries and exits, and bad records: the lister ends as the
// bus's state, and the handlers never see an object go backwards nor a
// delete of an object they never got.
func TestInformerOnBus(t *testing.T) {
	log := newFakeLog()
	a1, a2, a3 := cm("a", "a", 10, "x"), cm("a", "a", 11, "x"), cm("a", "a", 12, "x")
	b1, b2 := cm("b", "b", 13, "x"), cm("b", "b", 14, "y")
	c1 := cm("c", "c", 15, "y")
	c2 := cm("c", "c", 16, "x")
	d1, dNew := cm("d", "d", 17, "x"), cm("d", "d2", 30, "x")
	e1 := cm("e", "e", 18, "x")
	// History before the informer starts: repeats and an older state.
	log.append(rec("added", a1), rec("added", a1), rec("updated", a2), rec("added", b1), rec("added", c1),
		rec("added", d1), rec("added", e1))
	sel, _ := labels.Parse("app=x")
	opts := testOptions()
	opts.LabelSelector = sel
	lw := newLW(t, log, opts)
	inf, c, _ := runInformer(t, lw, 20*time.Millisecond)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a2), "ns/b": seenOf(b1), "ns/d": seenOf(d1), "ns/e": seenOf(e1)})

	bad := rec("added", cm("z", "z", 1))
	bad.Message.Data = []byte(`not json`)
	foreign := rec("added", cm("f", "f", 1, "x"))
	foreign.Message.Cluster = "other"
	log.append(
		rec("updated", a2), rec("updated", a1), // repeat, older
		rec("updated", b2),                     // leaves the selector
		rec("updated", c2),                     // enters it
		rec("added", dNew),                     // d recreated unseen
		rec("deleted", e1), rec("updated", e1), // deleted, then a late repeat
		tombstone(e1), rec("deleted", cm("never", "n", 5, "x")), // a tombstone after a delete, a delete of an object never held
		bad, foreign, Record{Key: "junk", Err: fmt.Errorf("undecodable")},
		rec("updated", a3),
	)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a3), "ns/c": seenOf(c2), "ns/d": seenOf(dNew)})
	st := lw.Stats()
	if st.BusLists != 1 || st.Invalid != 2 || st.Foreign != 1 || st.Duplicates < 3 || st.UnknownDeletes != 1 {
		t.Errorf("stats %+v: want 1 bus list, 2 invalid, 1 foreign, at least 3 duplicates and 1 unknown delete", st)
	}
}

// TestInformerRelistsOnExpired: a position the bus no longer holds makes
// the watch answer 410, and the reflector lists again (counted).
func TestInformerRelistsOnExpired(t *testing.T) {
	log := newFakeLog()
	a1, b1 := cm("a", "a", 10), cm("b", "b", 11)
	log.append(rec("added", a1), rec("added", b1))
	lw := newLW(t, log, testOptions())
	inf, c, _ := runInformer(t, lw, 0)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a1), "ns/b": seenOf(b1)})

	// b was deleted, and a compaction kept only its tombstone: a watch
	// cannot learn it, a list can.
	a2 := cm("a", "a", 13)
	log.mu.Lock()
	log.recs[1] = Record{Key: b1.busKey(), Position: log.recs[1].Position}
	log.mu.Unlock()
	log.expire(rec("updated", a2))
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a2)})
	if st := lw.Stats(); st.BusLists != 2 || st.Expired != 1 {
		t.Errorf("stats %+v: want 2 bus lists and 1 expired", st)
	}
}

// timeoutLW asks every watch to end after a second, as a reflector does
// after 5 to 10 minutes, and counts the watches.
type timeoutLW struct {
	*ListerWatcher
	watches atomic.Int64
}

func (l *timeoutLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	l.watches.Add(1)
	one := int64(1)
	opts.TimeoutSeconds = &one
	return l.ListerWatcher.WatchWithContext(ctx, opts)
}

// TestInformerWatchTimeoutResumes: a watch ended by its timeout is
// watched again from the informer's position, without a list.
func TestInformerWatchTimeoutResumes(t *testing.T) {
	log := newFakeLog()
	a1 := cm("a", "a", 10)
	log.append(rec("added", a1))
	tlw := &timeoutLW{ListerWatcher: newLW(t, log, testOptions())}
	inf, c, _ := runInformer(t, tlw, 0)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a1)})
	poll.UntilNil(t, 10*time.Second, func() error {
		if n := tlw.watches.Load(); n < 2 {
			return fmt.Errorf("%d watches, want a second one after the first timed out", n)
		}
		return nil
	})
	a2 := cm("a", "a", 11)
	log.append(rec("updated", a2))
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a2)})
	if st := lw(tlw).Stats(); st.BusLists != 1 || st.Expired != 0 {
		t.Errorf("stats %+v: want 1 bus list and nothing expired", st)
	}
}

func lw(t *timeoutLW) *ListerWatcher { return t.ListerWatcher }

// TestInformerBusFailureResumes: a Follow that fails (the bus
// unreachable) ends the watch cleanly after a while, and the reflector
// watches again without a list.
func TestInformerBusFailureResumes(t *testing.T) {
	log := newFakeLog()
	a1 := cm("a", "a", 10)
	log.append(rec("added", a1))
	l := newLW(t, log, testOptions())
	inf, c, _ := runInformer(t, l, 0)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a1)})
	log.failNext(1)
	a2 := cm("a", "a", 11)
	log.append(rec("updated", a2))
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a2)})
	if st := l.Stats(); st.BusLists != 1 {
		t.Errorf("stats %+v: want 1 bus list", st)
	}
}

// deleteRecorder is a handler that passes each deleted object to fn.
type deleteRecorder func(map[string]any)

func (deleteRecorder) OnAdd(any, bool)   {}
func (deleteRecorder) OnUpdate(any, any) {}
func (f deleteRecorder) OnDelete(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	f(o.(*unstructured.Unstructured).Object)
}

func annotations(o map[string]any) map[string]string {
	u := unstructured.Unstructured{Object: o}
	return u.GetAnnotations()
}
