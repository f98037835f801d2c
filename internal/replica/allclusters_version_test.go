package replica

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/internal/replica/cache"
)

// waitingContext is a request's context that closes waiting when the
// request first waits on it: a test feeds a cache only then, so that the
// position a request names is one the cache has not reached when it
// arrives.
type waitingContext struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingContext) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// twoClusters are the caches of clusters one and two, at p1 with a and b.
func twoClusters() map[string]*cache.Store {
	stores := map[string]*cache.Store{}
	for _, c := range []string{"one", "two"} {
		stores[c] = cache.NewStore(cache.Options{})
		_ = stores[c].Replace([]any{cm("a", 1, "10"), cm("b", 1, "11")}, "p1")
	}
	return stores
}

// An all-clusters list or watch from a composite naming a position a
// cluster's cache has not reached yet (another replica is ahead) waits
// for it, as a single-cluster one does: the list is not older than the
// composite, the watch resumes there.
func TestAllClustersWaitsForPositions(t *testing.T) {
	for _, verb := range []string{"list", "watch"} {
		t.Run(verb, func(t *testing.T) {
			s := bareServer(t, 0)
			stores := twoClusters()
			ctx := &waitingContext{Context: t.Context(), waiting: make(chan struct{})}
			go func() {
				<-ctx.waiting
				_ = stores["one"].Add(cm("fresh", 2, "20"))
			}()
			opts := &metainternalversion.ListOptions{ResourceVersion: encodeComposite(map[string]string{"one": "p2", "two": "p1"})}
			st := allOf(s, stores)
			if verb == "list" {
				obj, err := st.List(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, u := range obj.(*unstructured.UnstructuredList).Items {
					got = append(got, u.GetAnnotations()[AnnotationCluster]+"/"+u.GetName())
				}
				if !slices.Contains(got, "one/fresh") {
					t.Errorf("list from a composite naming p2 of cluster one: %v, older than p2 (no one/fresh)", got)
				}
				return
			}
			w, err := st.Watch(ctx, opts)
			if err != nil {
				t.Fatalf("watch from a composite naming p2 of cluster one: %v", err)
			}
			defer w.Stop()
			_ = stores["one"].Add(cm("later", 3, "30"))
			if e := next(t, w); e.Type != watch.Added || e.Object.(*unstructured.Unstructured).GetName() != "later" {
				t.Errorf("watch from p2 of cluster one: %s %s, want only ADDED later", e.Type, e.Object.(*unstructured.Unstructured).GetName())
			}
		})
	}
}

// An all-clusters list applies a single-cluster list's resourceVersion
// rules to each cluster its composite names: a position never reached
// is 410 Expired once the wait ends, Exact serves only the latest
// position, and a resourceVersion that is not a composite is 410.
func TestAllClustersListVersionRules(t *testing.T) {
	s := bareServer(t, 0)
	stores := twoClusters()
	_ = stores["one"].Add(cm("fresh", 2, "20"))
	for _, tc := range []struct {
		name  string
		rv    string
		match metav1.ResourceVersionMatch
		ok    bool
	}{
		{"a position never reached", encodeComposite(map[string]string{"one": "p99"}), "", false},
		{"exact, older than the latest", encodeComposite(map[string]string{"one": "p1", "two": "p1"}), metav1.ResourceVersionMatchExact, false},
		{"exact, the latest", encodeComposite(map[string]string{"one": "p2", "two": "p1"}), metav1.ResourceVersionMatchExact, true},
		{"not older than an older one", encodeComposite(map[string]string{"one": "p1", "two": "p1"}), metav1.ResourceVersionMatchNotOlderThan, true},
		{"not a composite", "p1", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As timeoutSeconds=1 does, shorter than the wait for a position.
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err := allOf(s, stores).List(ctx, &metainternalversion.ListOptions{ResourceVersion: tc.rv, ResourceVersionMatch: tc.match})
			switch {
			case tc.ok && err != nil:
				t.Errorf("got %v, want the list", err)
			case !tc.ok && !apierrors.IsResourceExpired(err):
				t.Errorf("got %v, want 410 Expired", err)
			}
		})
	}
}
