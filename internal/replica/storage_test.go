package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/internal/replica/access"
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
		Rules:         readAllRules(t),
		MaxLimit:      maxLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAllRules are rules that let every authenticated identity read
// everything but Secrets in every cluster.
func readAllRules(t *testing.T) *access.RulesFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeTestFile(t, path, `apiVersion: replica.kubebus.io/v1
kind: AccessRules
grants:
- subjects: [{kind: Group, name: system:authenticated}]
  clusters: ["*"]
  rules:
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: ["get", "list", "watch"]
`)
	rules, err := access.NewRulesFile(access.RulesFileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return rules
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

// next is w's next event, its object unshared, or a failure after 5 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		if sh, ok := e.Object.(*cache.Shared); ok {
			e.Object = sh.Object()
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

// list is one List call, its items' "name@resourceVersion", its
// resourceVersion and continue token.
func list(t *testing.T, l interface {
	List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error)
}, limit int64, cont string) ([]string, string, string, error) {
	t.Helper()
	o, err := l.List(t.Context(), &metainternalversion.ListOptions{Limit: limit, Continue: cont})
	if err != nil {
		return nil, "", "", err
	}
	ul := o.(*unstructured.UnstructuredList)
	var items []string
	for _, u := range ul.Items {
		name := u.GetName()
		if c := u.GetAnnotations()[AnnotationCluster]; c != "" {
			name = c + "/" + name
		}
		items = append(items, name+"@"+u.GetResourceVersion())
	}
	return items, ul.GetResourceVersion(), ul.GetContinue(), nil
}

// The pages of a list are one state, the first page's: client-go's pager
// keeps the first page's resourceVersion and its Reflector watches from
// it, so a later page at a newer state would make it go back. A token
// whose position has left the ring is 410 Expired, as the API server
// answers an expired continue.
func TestPagedListIsOneSnapshot(t *testing.T) {
	s := bareServer(t, 0)
	store := cache.NewStore(cache.Options{RingSize: 16})
	_ = store.Replace([]any{cm("a", 1, "10"), cm("b", 1, "11"), cm("d", 1, "12")}, "p1")
	st := oneStorage(s, store)
	items, rv, cont, err := list(t, st, 1, "")
	if err != nil || fmt.Sprint(items) != "[a@p1]" || rv != "p1" || cont == "" {
		t.Fatalf("page 1: %v at %s, continue %q, %v", items, rv, cont, err)
	}
	_ = store.Update(cm("b", 2, "20"))
	_ = store.Add(cm("c", 3, "21"))
	_ = store.Update(cm("b", 4, "22"))
	_ = store.Delete(cm("d", 5, "23"))
	items, rv, cont2, err := list(t, st, 0, cont)
	if err != nil || fmt.Sprint(items) != "[b@p1 d@p1]" || rv != "p1" || cont2 != "" {
		t.Errorf("page 2: %v at %s, continue %q, %v; want [b@p1 d@p1] at p1", items, rv, cont2, err)
	}
	for i := 6; i < 30; i++ {
		_ = store.Update(cm("b", i, strconv.Itoa(i)))
	}
	if _, _, _, err := list(t, st, 1, cont); !apierrors.IsResourceExpired(err) {
		t.Errorf("page 2 after the ring moved past page 1: %v, want 410 Expired", err)
	}
}

// The same for the all-clusters view, whose pages span clusters.
func TestPagedListIsOneSnapshotAllClusters(t *testing.T) {
	s := bareServer(t, 0)
	one, two := cache.NewStore(cache.Options{RingSize: 16}), cache.NewStore(cache.Options{RingSize: 16})
	_ = one.Replace([]any{cm("a", 1, "10"), cm("b", 1, "11")}, "p1")
	_ = two.Replace([]any{cm("a", 1, "10"), cm("b", 1, "11")}, "p1")
	st := allOf(s, map[string]*cache.Store{"one": one, "two": two})
	items, rv, cont, err := list(t, st, 1, "")
	if err != nil || fmt.Sprint(items) != "[one/a@"+rv+"]" || cont == "" {
		t.Fatalf("page 1: %v at %s, continue %q, %v", items, rv, cont, err)
	}
	_ = one.Update(cm("b", 2, "20"))
	_ = two.Delete(cm("a", 2, "20"))
	_ = two.Add(cm("c", 3, "21"))
	items, rv2, _, err := list(t, st, 0, cont)
	want := fmt.Sprintf("[one/b@%[1]s two/a@%[1]s two/b@%[1]s]", rv)
	if err != nil || fmt.Sprint(items) != want || rv2 != rv {
		t.Errorf("page 2: %v at %s, %v; want %s", items, rv2, err, want)
	}
	for i := 4; i < 30; i++ {
		_ = two.Update(cm("b", i, strconv.Itoa(i)))
	}
	if _, _, _, err := list(t, st, 1, cont); !apierrors.IsResourceExpired(err) {
		t.Errorf("page 2 after the ring moved past page 1: %v, want 410 Expired", err)
	}
}

// No limit (client-go's full list after an expired continue) is one
// page; a limit above MaxLimit is clamped to pages of MaxLimit with a
// continue token, never a silent cut.
func TestListLimits(t *testing.T) {
	s := bareServer(t, 2)
	store := cache.NewStore(cache.Options{})
	var objs []any
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		objs = append(objs, cm(n, 1, "10"))
	}
	_ = store.Replace(objs, "p1")
	for _, st := range []interface {
		List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error)
	}{oneStorage(s, store), allOf(s, map[string]*cache.Store{"one": store})} {
		items, _, cont, err := list(t, st, 0, "")
		if err != nil || len(items) != 5 || cont != "" {
			t.Errorf("%T, no limit: %v, continue %q, %v; want all 5, one page", st, items, cont, err)
		}
		var all []string
		cont = ""
		for page := 0; page == 0 || cont != ""; page++ {
			var items []string
			items, _, cont, err = list(t, st, 1<<40, cont)
			if err != nil || len(items) > 2 || page > 5 {
				t.Fatalf("%T, huge limit, page %d: %v, %v", st, page, items, err)
			}
			all = append(all, items...)
		}
		if len(all) != 5 {
			t.Errorf("%T, huge limit: pages hold %v, want all 5", st, all)
		}
	}
}

// A client that leaves an all-clusters watch during its initial events
// ends it cleanly (run with -race: the watchers' initial events were read
// and cleared by different goroutines).
func TestAllClustersWatchStoppedDuringInitialEvents(t *testing.T) {
	s := bareServer(t, 0)
	stores := map[string]*cache.Store{}
	for _, c := range []string{"one", "two", "three"} {
		stores[c] = cache.NewStore(cache.Options{})
		_ = stores[c].Replace([]any{cm("a", 1, "10"), cm("b", 1, "11"), cm("c", 1, "12")}, "p1")
	}
	st := allOf(s, stores)
	for range 20 {
		w, err := st.Watch(t.Context(), &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next(t, w)
		w.Stop()
		for range w.ResultChan() {
		}
	}
	for c, store := range stores {
		if n := store.Watchers(); n != 0 {
			t.Errorf("cluster %s: %d watchers left", c, n)
		}
	}
}

// An all-clusters watch of the state names a cluster in its composite
// resourceVersion only once that cluster's initial events are all sent: a
// client that resumes from an earlier event gets the rest of them.
func TestAllClustersCompositeAfterInitialEvents(t *testing.T) {
	s := bareServer(t, 0)
	stores := map[string]*cache.Store{}
	for _, c := range []string{"one", "two"} {
		stores[c] = cache.NewStore(cache.Options{})
		_ = stores[c].Replace([]any{cm("a", 1, "10"), cm("b", 1, "11"), cm("c", 1, "12")}, "p1")
	}
	for _, tc := range []struct {
		name string
		rv   string
	}{
		{"state", ""},
		{"new clusters of a composite", encodeComposite(map[string]string{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := allOf(s, stores).Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: tc.rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			sent := map[string]int{}
			for range 6 {
				u := next(t, w).Object.(*unstructured.Unstructured)
				sent[u.GetAnnotations()[AnnotationCluster]]++
				pos, err := decodeComposite(u.GetResourceVersion())
				if err != nil {
					t.Fatal(err)
				}
				for c := range pos {
					if sent[c] < 3 {
						t.Errorf("%s/%s: its composite names cluster %s, of which %d of 3 objects were sent", u.GetAnnotations()[AnnotationCluster], u.GetName(), c, sent[c])
					}
				}
			}
		})
	}
}

// Positions that cannot be served are 410 Expired (or 400), never a 500
// nor a watch from elsewhere: an unknown position whose wait the
// request's timeout cuts short, sendInitialEvents=true from an unknown
// position (the list from it is 410 too), a composite of JSON null.
func TestUnservablePositions(t *testing.T) {
	s := bareServer(t, 0)
	store := cache.NewStore(cache.Options{})
	_ = store.Replace([]any{cm("a", 1, "10")}, "p1")
	yes := true
	for _, tc := range []struct {
		name  string
		watch func(context.Context) (watch.Interface, error)
	}{
		{"unknown position, short timeout", func(ctx context.Context) (watch.Interface, error) {
			return oneStorage(s, store).Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "p99"})
		}},
		{"sendInitialEvents from an unknown position", func(ctx context.Context) (watch.Interface, error) {
			return oneStorage(s, store).Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "p99", SendInitialEvents: &yes})
		}},
		{"composite of null", func(ctx context.Context) (watch.Interface, error) {
			return allOf(s, map[string]*cache.Store{"one": store}).Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "m1.bnVsbA"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As timeoutSeconds=1 does, shorter than the wait for a position.
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			w, err := tc.watch(ctx)
			if err == nil {
				w.Stop()
			}
			if !apierrors.IsResourceExpired(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("got %v, want 410 Expired or 400", err)
			}
		})
	}
	// sendInitialEvents from a known position: the state.
	w, err := oneStorage(s, store).Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: "p1", SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := next(t, w); e.Type != watch.Added {
		t.Errorf("sendInitialEvents from p1: %s, want ADDED", e.Type)
	}
}

// A watch from a list's resourceVersion sends only the changes after the
// list: the list holds the whole state at its position, even when that
// position is a relist's, whose changes share it. In the all-clusters
// view, the same for each cluster its composite names.
func TestWatchFromListSendsOnlyLaterChanges(t *testing.T) {
	for _, tc := range []struct {
		view   string
		relist bool
	}{{"one", false}, {"one", true}, {"all", false}, {"all", true}} {
		view := tc.view
		t.Run(fmt.Sprintf("%s, relist %v", view, tc.relist), func(t *testing.T) {
			s := bareServer(t, 0)
			stores := map[string]*cache.Store{"one": cache.NewStore(cache.Options{}), "two": cache.NewStore(cache.Options{})}
			for _, store := range stores {
				_ = store.Replace([]any{cm("a", 1, "10"), cm("b", 1, "11"), cm("c", 1, "12")}, "p1")
				if tc.relist { // a relist of changes: they share p2
					_ = store.Replace([]any{cm("a", 2, "20"), cm("b", 2, "21"), cm("c", 2, "22")}, "p2")
				}
			}
			var l interface {
				List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error)
				Watch(context.Context, *metainternalversion.ListOptions) (watch.Interface, error)
			} = oneStorage(s, stores["one"])
			if view == "all" {
				l = allOf(s, stores)
			}
			_, rv, _, err := list(t, l, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			w, err := l.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			_ = stores["one"].Add(cm("fresh", 3, "30"))
			if e := next(t, w); e.Type != watch.Added || e.Object.(*unstructured.Unstructured).GetName() != "fresh" {
				t.Errorf("watch from the list's %s: %s %s, want only ADDED fresh", rv, e.Type, e.Object.(*unstructured.Unstructured).GetName())
			}
		})
	}
}
