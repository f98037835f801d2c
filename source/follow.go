package source

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

var (
	crdResource        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// followResync is how often the informers of the follower tell of every
// object again: a fallback that selects again even if an event was
// missed.
const followResync = 10 * time.Minute

// follower watches CustomResourceDefinitions and APIServices with
// client-go informers, and calls changed on every change of either, so
// that the Set selects again. It keeps of each CRD only what says which
// resource it defines and whether that is served, so that it can tell
// whether discovery already shows what the CRDs say (expected).
type follower struct {
	client  dynamic.Interface
	log     *slog.Logger
	changed func()

	mu   sync.Mutex
	crds cache.Store // nil until run started the CRD informer
	// defined are the resources of every CRD seen, deleted ones included.
	defined map[schema.GroupResource]bool
}

// run starts the informers and returns once ctx ends. An informer the
// bridge is forbidden to list at start is not started, with a warning:
// the resources watched then do not follow that kind of change. Any other
// failure is the informer's to retry, as it does for as long as it runs;
// a list or watch it is then forbidden is warned of, once.
func (f *follower) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, gvr := range []schema.GroupVersionResource{crdResource, apiServiceResource} {
		what := gvr.GroupResource().String()
		if _, err := f.client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsForbidden(err) {
			f.log.Warn("resources added or removed in the cluster are not followed: forbidden to list "+what+
				"; the resources watched stay those selected at start, and those served by CRDs or API services that change", "err", err)
			continue
		} else if err != nil && ctx.Err() == nil {
			f.log.Warn("cannot list "+what+" for now; following the cluster's changes once it can", "err", err)
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(f.client, gvr, metav1.NamespaceAll, followResync, cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(slim)
		var forbidden sync.Once
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				forbidden.Do(func() {
					f.log.Warn("resources added or removed in the cluster are not followed while the bridge is forbidden to list or watch "+what, "err", err)
				})
				return
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		handler := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { f.changed() },
			UpdateFunc: func(any, any) { f.changed() },
			DeleteFunc: func(any) { f.changed() },
		}
		if gvr == crdResource {
			f.mu.Lock()
			f.crds = inf.GetStore()
			f.defined = map[schema.GroupResource]bool{}
			f.mu.Unlock()
			handler.AddFunc = func(obj any) { f.define(obj); f.changed() }
			handler.UpdateFunc = func(_, obj any) { f.define(obj); f.changed() }
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			f.log.Warn("resources added or removed in the cluster are not followed: "+gvr.GroupResource().String(), "err", err)
			continue
		}
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// define records the resource a CRD defines.
func (f *follower) define(obj any) {
	if c, ok := crdOf(obj); ok {
		f.mu.Lock()
		f.defined[c.gr] = true
		f.mu.Unlock()
	}
}

// expected says what discovery must show, given the CRDs the informer
// holds now: served are the resources of CRDs established, served and
// not being deleted; gone are those of CRDs seen before that the
// informer no longer holds. Nil maps until the CRD informer runs.
func (f *follower) expected() (served, gone map[schema.GroupResource]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crds == nil {
		return nil, nil
	}
	served = map[schema.GroupResource]bool{}
	present := map[schema.GroupResource]bool{}
	for _, obj := range f.crds.List() {
		c, ok := crdOf(obj)
		if !ok {
			continue
		}
		present[c.gr] = true
		if c.served && c.established && !c.deleting {
			served[c.gr] = true
		}
	}
	gone = map[schema.GroupResource]bool{}
	for gr := range f.defined {
		if !present[gr] {
			gone[gr] = true
		}
	}
	return served, gone
}

// crd is what the follower reads of a CRD.
type crd struct {
	gr          schema.GroupResource
	served      bool
	established bool
	deleting    bool
}

func crdOf(obj any) (crd, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return crd{}, false
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	if group == "" || plural == "" {
		return crd{}, false
	}
	c := crd{gr: schema.GroupResource{Group: group, Resource: plural}, deleting: u.GetDeletionTimestamp() != nil}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["served"] == true {
			c.served = true
		}
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conditions {
		if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			c.established = true
		}
	}
	return c, true
}

// slim keeps of an object only what the follower reads, so that the
// informer's cache does not hold every CRD's schemas.
func slim(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	if ts := u.GetDeletionTimestamp(); ts != nil {
		out.SetDeletionTimestamp(ts)
	}
	for _, path := range [][]string{{"spec", "group"}, {"spec", "names", "plural"}} {
		if v, ok, _ := unstructured.NestedString(u.Object, path...); ok {
			_ = unstructured.SetNestedField(out.Object, v, path...)
		}
	}
	slimList(u, out, []string{"name", "served"}, "spec", "versions")
	slimList(u, out, []string{"type", "status"}, "status", "conditions")
	return out, nil
}

// slimList copies the list at path from u to out, each of its items cut
// down to keys.
func slimList(u, out *unstructured.Unstructured, keys []string, path ...string) {
	items, ok, _ := unstructured.NestedSlice(u.Object, path...)
	if !ok {
		return
	}
	slimmed := make([]any, 0, len(items))
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			kept := make(map[string]any, len(keys))
			for _, k := range keys {
				kept[k] = m[k]
			}
			slimmed = append(slimmed, kept)
		}
	}
	_ = unstructured.SetNestedSlice(out.Object, slimmed, path...)
}
