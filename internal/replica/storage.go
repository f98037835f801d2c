package replica

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubebus/bridge/internal/replica/cache"
	"github.com/kubebus/bridge/wire"
)

// waitForPosition is how long a list or watch from a position the cache
// has not seen waits for it to arrive (another replica may be ahead)
// before it is answered 410 Gone.
const waitForPosition = 2 * time.Second

// storage serves one resource of one cluster from its cache: the
// rest.Getter, rest.Lister and rest.Watcher the API server's handlers
// call.
type storage struct {
	s       *Server
	cluster string
	res     wire.DiscoveredResource
	store   *cache.Store
	table   rest.TableConvertor
}

var (
	_ rest.Getter  = (*storage)(nil)
	_ rest.Lister  = (*storage)(nil)
	_ rest.Watcher = (*storage)(nil)
)

func (st *storage) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: st.res.Group, Version: st.res.Version, Kind: st.res.Kind}
}

func (st *storage) gr() schema.GroupResource {
	return schema.GroupResource{Group: st.res.Group, Resource: st.res.Resource}
}

// Get serves the object's latest state; the resourceVersion of the
// options is not consulted (the latest state is never older than it).
func (st *storage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := request.NamespaceFrom(ctx)
	u, _, ok := st.store.Get(cache.Key(ns, name))
	if !ok {
		return nil, apierrors.NewNotFound(st.gr(), name)
	}
	st.s.m.served.Inc()
	return u, nil
}

func (st *storage) NewList() runtime.Object {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(st.gvk().GroupVersion().WithKind(st.res.Kind + "List"))
	return l
}

func (st *storage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return st.table.ConvertToTable(ctx, obj, opts)
}

// selection is what a list or watch selects.
type selection struct {
	namespace string
	// name, when set, is the one name served: the metadata.name field
	// selector as the request's RequestInfo read it, which the access
	// rules' resourceNames were checked against.
	name   string
	labels labels.Selector
	fields fields.Selector
}

func selectionOf(ctx context.Context, opts *metainternalversion.ListOptions) selection {
	ns, _ := request.NamespaceFrom(ctx)
	sel := selection{namespace: ns, labels: labels.Everything(), fields: fields.Everything()}
	if info, ok := request.RequestInfoFrom(ctx); ok && (info.Verb == "list" || info.Verb == "watch") {
		sel.name = info.Name
	}
	if opts.LabelSelector != nil {
		sel.labels = opts.LabelSelector
	}
	if opts.FieldSelector != nil {
		sel.fields = opts.FieldSelector
	}
	return sel
}

func (sel selection) matches(u *unstructured.Unstructured) bool {
	if sel.namespace != "" && u.GetNamespace() != sel.namespace {
		return false
	}
	if sel.name != "" && u.GetName() != sel.name {
		return false
	}
	if !sel.labels.Empty() && !sel.labels.Matches(labels.Set(u.GetLabels())) {
		return false
	}
	if !sel.fields.Empty() && !sel.fields.Matches(fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()}) {
		return false
	}
	return true
}

// continueToken is what a list's continue token holds: the key of the
// last object served, and the position of the first page.
type continueToken struct {
	V     int    `json:"v"`
	After string `json:"after"`
	Pos   string `json:"pos"`
}

func encodeContinue(t continueToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err == nil && (t.V != 1 || t.After == "") {
		err = errors.New("unknown form")
	}
	if err != nil {
		return t, apierrors.NewBadRequest(fmt.Sprintf("continue token is not one this replica wrote: %v", err))
	}
	return t, nil
}

// List serves the cache's current state, see docs/replica.md for the
// resourceVersion rules. The pages after the first are the state at the
// first page's position.
func (st *storage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := st.cache().checkListVersion(ctx, opts.ResourceVersion, opts.ResourceVersionMatch); err != nil {
		return nil, err
	}
	sel := selectionOf(ctx, opts)
	var objs []*unstructured.Unstructured
	var pos string
	if opts.Continue != "" {
		t, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		pos = t.Pos
		if objs, err = st.store.SnapshotAt(t.After, pos); err != nil {
			return nil, continueExpired(err)
		}
	} else {
		objs, pos = st.store.Snapshot("")
	}
	limit := pageLimit(opts.Limit, st.s.cfg.MaxLimit)
	list := st.NewList().(*unstructured.UnstructuredList)
	list.SetResourceVersion(pos)
	var remaining int64
	for _, u := range objs {
		if !sel.matches(u) {
			continue
		}
		if limit > 0 && int64(len(list.Items)) == limit {
			remaining++
			continue
		}
		list.Items = append(list.Items, *u)
	}
	if remaining > 0 {
		last := &list.Items[len(list.Items)-1]
		list.SetContinue(encodeContinue(continueToken{V: 1, After: cache.Key(last.GetNamespace(), last.GetName()), Pos: pos}))
		list.SetRemainingItemCount(&remaining)
	}
	st.s.m.served.Add(float64(len(list.Items)))
	return list, nil
}

// pageLimit is the size of a list's page: limit, clamped to max; 0 (no
// limit asked) serves the whole list in one page, as the API server does.
func pageLimit(limit, max int64) int64 {
	if limit <= 0 {
		return 0
	}
	return min(limit, max)
}

// continueExpired is the answer to a continue token whose position the
// cache no longer holds, as the API server answers an expired one.
func continueExpired(err error) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("the continue token's position is no longer held by this read-only replica (%v): list again without continue", err))
}

// clusterCache is one cluster's cache of one resource, as the
// resourceVersion rules of lists and watches see it; both views apply
// them through it, the all-clusters one to each cluster its composite
// names.
type clusterCache struct {
	cluster string
	gr      schema.GroupResource
	store   *cache.Store
}

func (st *storage) cache() clusterCache {
	return clusterCache{cluster: st.cluster, gr: st.gr(), store: st.store}
}

// checkListVersion answers a list from position pos ("" or "0" for any):
// with match Exact, 410 unless pos is the latest position (the only
// state served); otherwise it waits, as waitKnown, for a position the
// cache has not seen.
func (c clusterCache) checkListVersion(ctx context.Context, pos string, match metav1.ResourceVersionMatch) error {
	if pos == "" || pos == "0" {
		return nil
	}
	if match == metav1.ResourceVersionMatchExact && pos != c.store.Latest() {
		return apierrors.NewResourceExpired(fmt.Sprintf("this read-only replica of cluster %q serves only the latest state of %s (resourceVersion %q), not resourceVersion %q exactly", c.cluster, c.gr, c.store.Latest(), pos))
	}
	return c.waitKnown(ctx, pos)
}

// waitKnown waits up to waitForPosition for the cache to know pos; past
// it, or when the request ends first (its timeoutSeconds), 410 Expired.
func (c clusterCache) waitKnown(ctx context.Context, pos string) error {
	deadline := time.NewTimer(waitForPosition)
	defer deadline.Stop()
	for {
		known, changed := c.store.Known(pos)
		if known {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return c.expired(pos)
		case <-ctx.Done():
			return c.expired(pos)
		}
	}
}

func (c clusterCache) expired(pos string) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %q is not held by this read-only replica of %s in cluster %q (older than its latest changes, or of another bus): list again", pos, c.gr, c.cluster))
}

// Watch serves the cache's changes; see docs/replica.md for the
// resourceVersion rules.
func (st *storage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	w, initialEnd, err := st.startWatch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return st.s.stream(ctx, streamSource{
		watcher:    w,
		sel:        selectionOf(ctx, opts),
		gvk:        st.gvk(),
		bookmarks:  opts.AllowWatchBookmarks,
		initialEnd: initialEnd,
	}), nil
}

func (st *storage) startWatch(ctx context.Context, opts *metainternalversion.ListOptions) (*cache.Watcher, bool, error) {
	rv := opts.ResourceVersion
	initial := opts.SendInitialEvents
	switch {
	case initial != nil && *initial:
		if rv != "" && rv != "0" { // a state not older than rv, as a list from it
			if err := st.cache().waitKnown(ctx, rv); err != nil {
				return nil, false, err
			}
		}
		return st.store.WatchState(), opts.AllowWatchBookmarks, nil
	case rv == "" || rv == "0":
		if initial != nil { // sendInitialEvents=false: from now on
			w, err := st.store.WatchFrom(st.store.Latest())
			if err != nil { // the position moved on meanwhile
				return st.startWatch(ctx, opts)
			}
			return w, false, nil
		}
		return st.store.WatchState(), false, nil
	}
	if err := st.cache().waitKnown(ctx, rv); err != nil {
		return nil, false, err
	}
	w, err := st.store.WatchFrom(rv)
	if errors.Is(err, cache.ErrExpired) {
		return nil, false, st.cache().expired(rv)
	}
	return w, false, err
}
