package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// countingEncode encodes an object's name, counting its calls, and
// changes the object it is handed, as an encoder may.
func countingEncode(calls *atomic.Int64) func(runtime.Object, io.Writer) error {
	return func(obj runtime.Object, w io.Writer) error {
		calls.Add(1)
		u := obj.(*unstructured.Unstructured)
		_, err := fmt.Fprintf(w, "%s/%s", u.GetKind(), u.GetName())
		u.SetKind("Changed")
		return err
	}
}

func TestSharedEncodesOncePerIdentifier(t *testing.T) {
	u := object("a", 1, "10")
	sh := NewShared(u)
	var calls atomic.Int64
	encode := countingEncode(&calls)
	var wg sync.WaitGroup
	outs := make([][]byte, 64)
	for i := range outs {
		wg.Go(func() {
			var b bytes.Buffer
			if err := sh.CacheEncode(runtime.Identifier(fmt.Sprint(i%2)), encode, &b); err != nil {
				t.Error(err)
			}
			outs[i] = b.Bytes()
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Errorf("encoded %d times for 2 identifiers", n)
	}
	for i, b := range outs {
		if string(b) != "ConfigMap/a" {
			t.Errorf("writer %d got %q", i, b)
		}
	}
	if u.GetKind() != "ConfigMap" || sh.Object() != u {
		t.Errorf("the shared object changed: %v", u.Object)
	}
}

func TestSharedBounded(t *testing.T) {
	sh := NewShared(object("a", 1, "10"))
	var calls atomic.Int64
	encode := countingEncode(&calls)
	for round := range 2 {
		for i := range MaxEncodings + 3 {
			var b bytes.Buffer
			if err := sh.CacheEncode(runtime.Identifier(fmt.Sprint(i)), encode, &b); err != nil || b.String() != "ConfigMap/a" {
				t.Fatalf("round %d, identifier %d: %q, %v", round, i, b.String(), err)
			}
		}
	}
	// The first MaxEncodings once; the 3 past the bound every time.
	if n, want := calls.Load(), int64(MaxEncodings+2*3); n != want {
		t.Errorf("encoded %d times, want %d", n, want)
	}
	if len(sh.encodings) != MaxEncodings {
		t.Errorf("%d encodings kept", len(sh.encodings))
	}
}

func TestSharedError(t *testing.T) {
	sh := NewShared(object("a", 1, "10"))
	boom := errors.New("boom")
	var calls atomic.Int64
	fail := func(runtime.Object, io.Writer) error { calls.Add(1); return boom }
	for range 2 {
		var b bytes.Buffer
		if err := sh.CacheEncode("id", fail, &b); !errors.Is(err, boom) || b.Len() != 0 {
			t.Errorf("%v, wrote %q", err, b.String())
		}
	}
	if calls.Load() != 1 {
		t.Errorf("a failed encoding was tried %d times", calls.Load())
	}
}

func TestSharedKindReadOnly(t *testing.T) {
	u := object("a", 1, "10")
	sh := NewShared(u)
	sh.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind().GroupVersion().WithKind("Other"))
	sh.GetObject().GetObjectKind().SetGroupVersionKind(u.GroupVersionKind().GroupVersion().WithKind("Other"))
	if k := sh.GetObjectKind().GroupVersionKind().Kind; k != "ConfigMap" || u.GetKind() != "ConfigMap" {
		t.Errorf("kind %q, object's %q", k, u.GetKind())
	}
}

// Watchers fed live share one Shared per change when there are several;
// a lone watcher, the ring and Initial hold none.
func TestStoreShares(t *testing.T) {
	s := NewStore(Options{})
	if err := s.Replace(nil, "p0"); err != nil {
		t.Fatal(err)
	}
	lone := s.WatchState()
	if err := s.Add(object("a", 1, "10")); err != nil {
		t.Fatal(err)
	}
	if e := <-lone.Events(); e.Type != watch.Added || e.Shared != nil {
		t.Errorf("a lone watcher's event: %s, shared %v", e.Type, e.Shared != nil)
	}
	other := s.WatchState()
	if err := s.Update(object("a", 2, "20")); err != nil {
		t.Fatal(err)
	}
	a, b := <-lone.Events(), <-other.Events()
	if a.Shared == nil || a.Shared != b.Shared || a.Shared.Object() != a.Object {
		t.Errorf("two watchers' events: %p and %p, of %p", a.Shared, b.Shared, a.Object)
	}
	resumed, err := s.WatchFrom("p1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append(resumed.Initial, other.Initial...) {
		if e.Shared != nil {
			t.Errorf("an event of Initial is shared: %v", e)
		}
	}
	for i := range s.n {
		if s.ring[(s.first+i)%len(s.ring)].Shared != nil {
			t.Errorf("the ring keeps a Shared at %d", i)
		}
	}
}
