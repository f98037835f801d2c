package source

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// listFunc is told of every complete list an informer made of gvr in ns
// ("" for all namespaces), with the resourceVersion the list is at. It is
// called before the informer hands the listed objects on.
type listFunc func(gvr schema.GroupVersionResource, ns, rv string)

// listingClient is a dynamic client that reports the lists informers make.
// Informers list on start and again whenever their watch cannot resume
// (410 Gone after compaction, for example); these reports are how the
// source counts relists and tells their deltas from those of the watch.
// Both ways of listing are seen: a LIST call, and a watch that streams the
// initial state (sendInitialEvents) and ends it with a bookmark.
type listingClient struct {
	dynamic.Interface
	on listFunc
}

func (c listingClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return listingNamespaceable{
		NamespaceableResourceInterface: c.Interface.Resource(gvr),
		lister:                         lister{gvr: gvr, on: c.on},
	}
}

type lister struct {
	gvr schema.GroupVersionResource
	ns  string
	on  listFunc
}

func (l lister) list(ctx context.Context, opts metav1.ListOptions, do func(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error)) (*unstructured.UnstructuredList, error) {
	list, err := do(ctx, opts)
	if err == nil {
		l.on(l.gvr, l.ns, list.GetResourceVersion())
	}
	return list, err
}

func (l lister) watch(ctx context.Context, opts metav1.ListOptions, do func(context.Context, metav1.ListOptions) (watch.Interface, error)) (watch.Interface, error) {
	w, err := do(ctx, opts)
	if err != nil || opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
		return w, err
	}
	return newListingWatch(w, func(rv string) { l.on(l.gvr, l.ns, rv) }), nil
}

type listingNamespaceable struct {
	dynamic.NamespaceableResourceInterface
	lister
}

func (r listingNamespaceable) Namespace(ns string) dynamic.ResourceInterface {
	l := r.lister
	l.ns = ns
	return listingResource{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), lister: l}
}

func (r listingNamespaceable) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return r.list(ctx, opts, r.NamespaceableResourceInterface.List)
}

func (r listingNamespaceable) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return r.watch(ctx, opts, r.NamespaceableResourceInterface.Watch)
}

type listingResource struct {
	dynamic.ResourceInterface
	lister
}

func (r listingResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return r.list(ctx, opts, r.ResourceInterface.List)
}

func (r listingResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return r.watch(ctx, opts, r.ResourceInterface.Watch)
}

// listingWatch passes a watch's events on, and reports the bookmark that
// ends its initial events.
type listingWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func newListingWatch(inner watch.Interface, ended func(rv string)) *listingWatch {
	w := &listingWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		reported := false
		for ev := range inner.ResultChan() {
			if !reported && ev.Type == watch.Bookmark {
				if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					reported = true
					ended(m.GetResourceVersion())
				}
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *listingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *listingWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.inner.Stop()
}
