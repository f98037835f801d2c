package replica

import (
	"errors"
	"strconv"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/internal/replica/cache"
)

// The tests of this file serve caches fed directly, as the Reflector
// feeds them, through the storages the API server's handlers call.

// bareServer is a Server whose caches the tests make and feed.
func bareServer(t *testing.T, maxLimit int64) *Server {
	t.Helper()
	s, err := New(Config{
		Discovery: testDiscovery(nil),
		NewListerWatcher: func(string, schema.GroupResource) (clientcache.ListerWatcher, error) {
			return nil, errors.New("the test feeds its caches")
		},
		Authenticator: bearertoken.New(tokenfile.New(map[string]*user.DefaultInfo{})),
		Authorizer:    allowAll,
		MaxLimit:      maxLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var cmResource = cmDiscovery("one").Resources[0]

func oneStorage(s *Server, store *cache.Store) *storage {
	return &storage{s: s, cluster: "one", res: cmResource, store: store}
}

func allOf(s *Server, stores map[string]*cache.Store) *allStorage {
	st := &allStorage{s: s, res: cmResource}
	for _, c := range []string{"one", "two", "three"} {
		if store, ok := stores[c]; ok {
			st.members = append(st.members, member{cluster: c, store: store})
		}
	}
	return st
}

// cm is ConfigMap ns/name at bus position p<pos>, of API resourceVersion
// apiRV, with labels kv (key, value, ...).
func cm(name string, pos int, apiRV string, kv ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetResourceVersion("p" + strconv.Itoa(pos))
	u.SetAnnotations(map[string]string{"kubebus.io/resource-version": apiRV})
	if len(kv) > 0 {
		l := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		u.SetLabels(l)
	}
	return u
}

// next is w's next event, or a failure after 5 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event in 5 s")
	}
	return watch.Event{}
}

func selector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// A delete whose final state left a label selector (the bridge coalesced
// the label change into the delete) reaches a watch of that selector as
// DELETED: the client held the object, and must not keep a ghost.
func TestSelectedWatchSeesDelete(t *testing.T) {
	for _, view := range []string{"one", "all"} {
		t.Run(view, func(t *testing.T) {
			s := bareServer(t, 0)
			store := cache.NewStore(cache.Options{})
			_ = store.Replace([]any{cm("a", 1, "10", "app", "x")}, "p1")
			opts := &metainternalversion.ListOptions{LabelSelector: selector(t, "app=x"), ResourceVersion: "p1"}
			var w watch.Interface
			var err error
			if view == "one" {
				w, err = oneStorage(s, store).Watch(t.Context(), opts)
			} else {
				opts.ResourceVersion = encodeComposite(map[string]string{"one": "p1"})
				w, err = allOf(s, map[string]*cache.Store{"one": store}).Watch(t.Context(), opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if err := store.Delete(cm("a", 2, "11")); err != nil {
				t.Fatal(err)
			}
			if e := next(t, w); e.Type != watch.Deleted || e.Object.(*unstructured.Unstructured).GetName() != "a" {
				t.Errorf("got %s %v, want DELETED a", e.Type, e.Object)
			}
		})
	}
}
