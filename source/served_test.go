package source

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/restmapper"
	k8stesting "k8s.io/client-go/testing"
)

var widgets = Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
	Kind: "Widget", Namespaced: true}

// A check's verdicts, from what discovery says after a NotFound.
func TestServedStateObserve(t *testing.T) {
	timing := defaultServedTiming
	type obs struct {
		versions []string
		at       time.Duration
		want     string // "served", "next <duration>" or "stop"
	}
	for _, tc := range []struct {
		name string
		obs  []obs
	}{
		{"served at its version", []obs{{[]string{"v1"}, 0, "served"}}},
		{"served at its version among others", []obs{{[]string{"v2", "v1"}, 0, "served"}}},
		{"moved: confirmed by three checks", []obs{
			{[]string{"v2"}, 0, "next 1s"}, {[]string{"v2"}, time.Second, "next 1s"}, {[]string{"v2"}, 2 * time.Second, "stop"}}},
		{"moved twice: the count starts again", []obs{
			{[]string{"v2"}, 0, "next 1s"}, {[]string{"v2"}, time.Second, "next 1s"},
			{[]string{"v3"}, 2 * time.Second, "next 1s"}, {[]string{"v3"}, 3 * time.Second, "next 1s"}, {[]string{"v3"}, 4 * time.Second, "stop"}}},
		{"a lag of discovery: gone, then back", []obs{
			{nil, 0, "next 5s"}, {[]string{"v2"}, time.Second, "next 1s"}, {[]string{"v1"}, 2 * time.Second, "served"}}},
		{"gone, then moved", []obs{
			{nil, 0, "next 5s"}, {nil, 4 * time.Minute, "next 5s"}, {[]string{"v2"}, 4*time.Minute + 5*time.Second, "next 1s"},
			{[]string{"v2"}, 4*time.Minute + 6*time.Second, "next 1s"}, {[]string{"v2"}, 4*time.Minute + 7*time.Second, "stop"}}},
		{"gone for good", []obs{
			{nil, 0, "next 5s"}, {nil, 4*time.Minute + 58*time.Second, "next 2s"}, {nil, 5 * time.Minute, "stop"}}},
		{"gone, back, gone: the wait starts again", []obs{
			{nil, 0, "next 5s"}, {[]string{"v1"}, 4 * time.Minute, "served"}, {nil, 6 * time.Minute, "next 5s"}, {nil, 10 * time.Minute, "next 5s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := servedState{res: widgets, timing: timing}
			start := time.Unix(1_000_000, 0)
			for i, o := range tc.obs {
				step := st.observe(o.versions, start.Add(o.at))
				var got string
				switch {
				case step.err != nil:
					got = "stop"
				case step.served:
					got = "served"
				default:
					got = "next " + step.next.String()
				}
				if got != o.want {
					t.Fatalf("check %d (%v at %s): %s, want %s", i, o.versions, o.at, got, o.want)
				}
			}
		})
	}
}

func TestNotServedErrorNamesResourceAndVersions(t *testing.T) {
	for _, tc := range []struct {
		err  *NotServedError
		want []string
	}{
		{&NotServedError{Resource: widgets, Served: []string{"v2"}}, []string{"widgets.example.com", "served at v2", "no longer at v1"}},
		{&NotServedError{Resource: widgets, For: 5 * time.Minute}, []string{"widgets.example.com", "no longer served at v1 nor at any other version", "5m0s"}},
	} {
		msg := tc.err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q does not say %q", msg, w)
			}
		}
		if !errors.Is(tc.err, ErrNotServed) {
			t.Errorf("%q does not wrap ErrNotServed", msg)
		}
	}
}

// discoveryAt is a discovery client whose served versions of widgets a
// test changes while a check reads them.
type discoveryAt struct {
	mu sync.Mutex
	*fake.FakeDiscovery
}

func newDiscoveryAt(versions ...string) *discoveryAt {
	d := &discoveryAt{FakeDiscovery: &fake.FakeDiscovery{Fake: &k8stesting.Fake{}}}
	d.serve(versions...)
	return d
}

// serve makes widgets.example.com served at versions, preferred first.
func (d *discoveryAt) serve(versions ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "watch"}}}}}
	for _, v := range versions {
		d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: "example.com/" + v, APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: []string{"list", "watch"}}}})
	}
}

func (d *discoveryAt) ServerGroupsWithContext(ctx context.Context) (*metav1.APIGroupList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroupsWithContext(ctx)
}

func (d *discoveryAt) ServerResourcesForGroupVersionWithContext(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
}

func (d *discoveryAt) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroupsAndResourcesWithContext(ctx)
}

// servedLog records what a check tells its observer.
type servedLog struct {
	mu  sync.Mutex
	got []bool
}

func (o *servedLog) Served(res Resource, served bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, served)
}

func (o *servedLog) calls() []bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// startCheck runs a check of widgets (watched at v1) against d, returning
// its error, or errRunning while it runs, through result.
func startCheck(t *testing.T, d *discoveryAt) (c *servedCheck, obs *servedLog, result func() error, stop func()) {
	t.Helper()
	obs = &servedLog{}
	c = &servedCheck{res: widgets, timing: defaultServedTiming, observer: obs, notFound: make(chan struct{}, 1),
		log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		mapper: restmapper.NewDeferredDiscoveryRESTMapperWithContext(memory.NewMemCacheClientWithContext(d))}
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu   sync.Mutex
		err  = errRunning
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		e := c.run(ctx)
		mu.Lock()
		err = e
		mu.Unlock()
	}()
	result = func() error {
		mu.Lock()
		defer mu.Unlock()
		return err
	}
	return c, obs, result, func() { cancel(); <-done }
}

var errRunning = errors.New("still running")

func TestServedCheck(t *testing.T) {
	t.Run("a NotFound while served at its version changes nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDiscoveryAt("v1")
			c, obs, result, stop := startCheck(t, d)
			c.poke()
			time.Sleep(time.Hour)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Errorf("check ended: %v", err)
			}
			if got := obs.calls(); !slices.Equal(got, []bool{true}) {
				t.Errorf("observer told %v, want [true]", got)
			}
			stop()
			if err := result(); err != nil {
				t.Errorf("after ctx ended: %v, want nil", err)
			}
		})
	})

	t.Run("moved to v2: stops within two seconds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDiscoveryAt("v2")
			c, obs, result, stop := startCheck(t, d)
			defer stop()
			c.poke()
			time.Sleep(2*time.Second - time.Millisecond)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Fatalf("stopped before the third check: %v", err)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			var nse *NotServedError
			if err := result(); !errors.As(err, &nse) || !slices.Equal(nse.Served, []string{"v2"}) || nse.Resource != widgets {
				t.Fatalf("after three checks: %v, want a NotServedError naming v2", err)
			}
			if got := obs.calls(); !slices.Equal(got, []bool{true, false}) {
				t.Errorf("observer told %v, want [true false]", got)
			}
		})
	})

	t.Run("gone, then recreated at v2: waits, then stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDiscoveryAt()
			c, _, result, stop := startCheck(t, d)
			defer stop()
			c.poke()
			time.Sleep(4 * time.Minute)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Fatalf("stopped while the resource was gone for 4m: %v", err)
			}
			d.serve("v2")
			time.Sleep(5*time.Second + 2*time.Second)
			synctest.Wait()
			var nse *NotServedError
			if err := result(); !errors.As(err, &nse) || !slices.Equal(nse.Served, []string{"v2"}) {
				t.Fatalf("7s after v2 was served: %v, want a NotServedError naming v2", err)
			}
		})
	})

	t.Run("gone for good: stops after five minutes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDiscoveryAt()
			c, _, result, stop := startCheck(t, d)
			defer stop()
			c.poke()
			time.Sleep(5*time.Minute - time.Millisecond)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Fatalf("stopped before five minutes: %v", err)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			var nse *NotServedError
			if err := result(); !errors.As(err, &nse) || len(nse.Served) != 0 || nse.For != 5*time.Minute {
				t.Fatalf("after five minutes: %v, want a NotServedError served nowhere for 5m", err)
			}
		})
	})

	t.Run("gone, then back at v1: keeps going", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDiscoveryAt()
			c, obs, result, stop := startCheck(t, d)
			c.poke()
			time.Sleep(time.Minute)
			d.serve("v1")
			time.Sleep(time.Hour)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Fatalf("check ended: %v", err)
			}
			if got := obs.calls(); !slices.Equal(got, []bool{true, false, true}) {
				t.Errorf("observer told %v, want [true false true]", got)
			}
			// Gone again later: the five minutes start again.
			d.serve()
			c.poke()
			time.Sleep(4 * time.Minute)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Fatalf("stopped 4m after it was gone again: %v", err)
			}
			stop()
		})
	})

	t.Run("discovery failing: keeps going", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := newDiscoveryAt()
			d.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
			c, _, result, stop := startCheck(t, d)
			defer stop()
			c.poke()
			time.Sleep(time.Hour)
			synctest.Wait()
			if err := result(); err != errRunning {
				t.Fatalf("stopped on discovery failures: %v", err)
			}
		})
	})
}
