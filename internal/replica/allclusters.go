package replica

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"github.com/kubebus/bridge/internal/replica/cache"
	"github.com/kubebus/bridge/wire"
)

// The all-clusters view (/clusters/*/...) merges the caches of every
// cluster whose discovery names the resource and that the identity may
// read (the rules' Scope of the request; a cluster it may not read is
// left out, never an error). A cluster whose cache has not synced within
// SyncTimeout (the caches start together) is left out too, logged, and
// named in a Warning header; the request fails only when every cluster
// is left out so. Each object is a copy carrying
// AnnotationCluster.
//
// Its resourceVersion is composite: "m1." and the base64url of a JSON
// object from cluster name to that cluster's bus position. A list is at
// the composite of the positions its clusters' caches were at; a watch
// event's object is at the composite after it, so that a client that
// watches again from it resumes every cluster where it was. A cluster the
// composite does not name (it appeared since) is watched from its current
// state, as Added. A list or watch from a composite applies the
// single-cluster rules to each cluster it names: a position its cache has
// not reached is waited for, Exact is only the latest position. A
// composite any of whose positions a cache does not hold is answered 410
// Gone.

const compositePrefix = "m1."

func encodeComposite(pos map[string]string) string {
	b, _ := json.Marshal(pos)
	return compositePrefix + base64.RawURLEncoding.EncodeToString(b)
}

func decodeComposite(rv string) (map[string]string, error) {
	enc, ok := strings.CutPrefix(rv, compositePrefix)
	if !ok {
		return nil, fmt.Errorf("resourceVersion %q is not one of the all-clusters view (they start with %q)", truncate(rv, 80), compositePrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	var m map[string]string
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil && m == nil {
		err = errors.New("not a JSON object")
	}
	if err != nil {
		return nil, fmt.Errorf("resourceVersion %q of the all-clusters view does not decode: %v", truncate(rv, 80), err)
	}
	return m, nil
}

// member is one cluster's cache in the all-clusters view.
type member struct {
	cluster string
	store   *cache.Store
}

// allStorage serves one resource of every readable cluster.
type allStorage struct {
	s       *Server
	res     wire.DiscoveredResource
	members []member // in cluster name order
	table   rest.TableConvertor
}

func (s *Server) serveAll(w http.ResponseWriter, r *http.Request, res wire.DiscoveredResource, info *request.RequestInfo) {
	ctx := r.Context()
	attrs, err := filters.GetAuthorizerAttributes(ctx)
	if err != nil {
		writeStatus(w, r, apierrors.NewInternalError(err), "")
		return
	}
	// One Scope per request, from one version of the rules: the clusters
	// on which this very request is allowed.
	scope := s.cfg.Rules.Current().Scope(attrs)
	gvr := res.GroupVersionResource()
	st := &allStorage{s: s, res: res, table: newTableConvertor(res, true)}
	var clusters []string
	for _, c := range s.disc.clusters() {
		if !scope.Has(c) {
			continue
		}
		if _, ok := s.disc.resource(c, res.Group, res.Version, res.Resource); !ok {
			continue
		}
		clusters = append(clusters, c)
	}
	// The members' caches start together, under the one SyncTimeout of
	// store: a cluster that never syncs costs the view one deadline, not
	// one per cluster, and is left out rather than failing it.
	stores := make([]*cache.Store, len(clusters))
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = s.store(ctx, c, gvr)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		writeStatus(w, r, apierrors.NewTimeoutError(err.Error(), 1), "")
		return
	}
	var firstErr error
	for i, c := range clusters {
		if errs[i] != nil {
			firstErr = cmp.Or(firstErr, storeError(errs[i], c, gvr))
			s.log.Warn("replica: all-clusters view: a cluster is left out", "cluster", c, "resource", gvr.GroupResource().String(), "err", errs[i])
			warning.AddWarning(ctx, "", fmt.Sprintf("cluster %q is left out of this all-clusters view: %v", c, storeError(errs[i], c, gvr)))
			continue
		}
		st.members = append(st.members, member{cluster: c, store: stores[i]})
	}
	if len(st.members) == 0 && firstErr != nil {
		writeStatus(w, r, firstErr, "")
		return
	}
	s.serveResource(w, r, st, res, info)
}

var (
	_ rest.Getter  = (*allStorage)(nil)
	_ rest.Lister  = (*allStorage)(nil)
	_ rest.Watcher = (*allStorage)(nil)
)

func (st *allStorage) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: st.res.Group, Version: st.res.Version, Kind: st.res.Kind}
}

// tagged is a copy of u carrying its cluster, at rv.
func tagged(u *unstructured.Unstructured, cluster, rv string) *unstructured.Unstructured {
	c := u.DeepCopy()
	a := c.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationCluster] = cluster
	c.SetAnnotations(a)
	c.SetResourceVersion(rv)
	return c
}

// Get serves the object of that name from the first cluster, in name
// order, that holds it.
func (st *allStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := request.NamespaceFrom(ctx)
	pos := map[string]string{}
	for _, m := range st.members {
		pos[m.cluster] = m.store.Latest()
	}
	for _, m := range st.members {
		if u, _, ok := m.store.Get(cache.Key(ns, name)); ok {
			st.s.m.served.Inc()
			return tagged(u, m.cluster, encodeComposite(pos)), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: st.res.Group, Resource: st.res.Resource}, name)
}

func (st *allStorage) NewList() runtime.Object {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(st.gvk().GroupVersion().WithKind(st.res.Kind + "List"))
	return l
}

func (st *allStorage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return st.table.ConvertToTable(ctx, obj, opts)
}

// List merges the clusters' current states, in cluster then key order.
// A composite resourceVersion is checked as a single-cluster list's for
// each cluster it names (see checkPositions). The pages after the first
// are the state at the first page's composite; a cluster it does not
// name (new since) is left out of them.
func (st *allStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if rv := opts.ResourceVersion; rv != "" && rv != "0" {
		from, err := decodeComposite(rv)
		if err != nil {
			return nil, apierrors.NewResourceExpired(err.Error() + ": list again")
		}
		if err := st.checkPositions(ctx, from, opts.ResourceVersionMatch); err != nil {
			return nil, err
		}
	}
	sel := selectionOf(ctx, opts)
	after, first := "", ""
	var from map[string]string
	if opts.Continue != "" {
		t, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		after, first = t.After, t.Pos
		if from, err = decodeComposite(t.Pos); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("continue token is not one of the all-clusters view: %v", err))
		}
	}
	limit := pageLimit(opts.Limit, st.s.cfg.MaxLimit)
	type item struct {
		cluster string
		u       *unstructured.Unstructured
	}
	var items []item
	pos := map[string]string{}
	for _, m := range st.members {
		var objs []*unstructured.Unstructured
		if from == nil {
			objs, pos[m.cluster] = m.store.Snapshot("")
		} else if p, named := from[m.cluster]; named {
			var err error
			if objs, err = m.store.SnapshotAt("", p); err != nil {
				return nil, continueExpired(fmt.Errorf("cluster %q: %w", m.cluster, err))
			}
			pos[m.cluster] = p
		}
		for _, u := range objs {
			if sel.matches(u) && (after == "" || m.cluster+"\x00"+cache.Key(u.GetNamespace(), u.GetName()) > after) {
				items = append(items, item{m.cluster, u})
			}
		}
	}
	rv := encodeComposite(pos)
	if first != "" {
		rv = first // even when a cluster it names is no longer readable
	}
	list := st.NewList().(*unstructured.UnstructuredList)
	list.SetResourceVersion(rv)
	for i, it := range items {
		if limit > 0 && int64(i) == limit {
			remaining := int64(len(items) - i)
			last := items[i-1]
			list.SetContinue(encodeContinue(continueToken{V: 1, After: last.cluster + "\x00" + cache.Key(last.u.GetNamespace(), last.u.GetName()), Pos: rv}))
			list.SetRemainingItemCount(&remaining)
			break
		}
		list.Items = append(list.Items, *tagged(it.u, it.cluster, rv))
	}
	st.s.m.served.Add(float64(len(list.Items)))
	return list, nil
}

func (st *allStorage) cache(m member) clusterCache {
	return clusterCache{cluster: m.cluster, gr: schema.GroupResource{Group: st.res.Group, Resource: st.res.Resource}, store: m.store}
}

// checkPositions applies a single-cluster list's resourceVersion rules
// (clusterCache.checkListVersion) to each member the composite from
// names: a position its cache has not seen is waited for, all of them
// within one waitForPosition, and with match Exact a position other than
// the latest is 410.
func (st *allStorage) checkPositions(ctx context.Context, from map[string]string, match metav1.ResourceVersionMatch) error {
	ctx, cancel := context.WithTimeout(ctx, waitForPosition)
	defer cancel()
	for _, m := range st.members {
		if p, named := from[m.cluster]; named {
			if err := st.cache(m).checkListVersion(ctx, p, match); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergedEvent is one cluster's event, or the end of its initial events
// (initialDone).
type mergedEvent struct {
	cluster     string
	e           cache.Event
	initialDone bool
	cut         bool
}

// Watch merges the clusters' watches.
func (st *allStorage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	rv := opts.ResourceVersion
	state := (opts.SendInitialEvents != nil && *opts.SendInitialEvents) || ((rv == "" || rv == "0") && opts.SendInitialEvents == nil)
	var from map[string]string
	if rv != "" && rv != "0" {
		m, err := decodeComposite(rv)
		if err != nil {
			return nil, apierrors.NewResourceExpired(err.Error() + ": list again")
		}
		from = m
		if err := st.checkPositions(ctx, from, ""); err != nil {
			return nil, err
		}
	}
	var watchers []*cache.Watcher
	stopAll := func() {
		for _, w := range watchers {
			w.Stop()
		}
	}
	// pos is the composite of the events sent. A cluster watched from its
	// state enters it only once its initial events are all sent: a client
	// that resumes from an earlier event gets them all again.
	pos := map[string]string{}
	for _, m := range st.members {
		var w *cache.Watcher
		p, named := from[m.cluster]
		switch {
		case state || (from != nil && !named):
			watchers = append(watchers, m.store.WatchState())
			continue
		case from == nil: // sendInitialEvents=false from "" or "0"
			for w == nil { // until the latest position stays while it starts
				w, _ = m.store.WatchFrom(m.store.Latest())
			}
		default:
			var err error
			if w, err = m.store.WatchFrom(p); err != nil {
				stopAll()
				return nil, st.cache(m).expired(p)
			}
		}
		watchers = append(watchers, w)
		pos[m.cluster] = w.Start
		if from != nil {
			pos[m.cluster] = p
		}
	}
	sel := selectionOf(ctx, opts)
	out := &watchStream{result: make(chan watch.Event), stop: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	merged := make(chan mergedEvent)
	var wg sync.WaitGroup
	for i, w := range watchers {
		cluster := st.members[i].cluster
		initial := w.Initial
		w.Initial = nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			feed(ctx, cluster, w, initial, merged)
		}()
	}
	// cut is closed when the cache cuts any of the watchers: the merged
	// watch ends then, even while its send waits on a client that does
	// not read.
	cut := make(chan struct{})
	var cutOnce sync.Once
	for _, w := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-w.Done():
				if w.Cut() {
					cutOnce.Do(func() { close(cut) })
				}
			case <-ctx.Done():
			}
		}()
	}
	st.s.m.watchers.Inc()
	go func() {
		defer st.s.m.watchers.Dec()
		defer close(out.result)
		defer wg.Wait()
		defer cancel()
		defer stopAll()
		st.pumpMerged(ctx, sel, out, merged, cut, pos, len(watchers), opts.AllowWatchBookmarks, state && opts.AllowWatchBookmarks && opts.SendInitialEvents != nil)
	}()
	return out, nil
}

// feed sends w's initial events (taken from it before any goroutine
// runs), a marker, then its live events to out.
func feed(ctx context.Context, cluster string, w *cache.Watcher, initial []cache.Event, out chan<- mergedEvent) {
	send := func(m mergedEvent) bool {
		select {
		case out <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i, e := range initial {
		initial[i] = cache.Event{}
		if !send(mergedEvent{cluster: cluster, e: e}) {
			return
		}
	}
	if !send(mergedEvent{cluster: cluster, e: cache.Event{Pos: w.Start}, initialDone: true}) {
		return
	}
	for e := range w.Events() {
		if !send(mergedEvent{cluster: cluster, e: e}) {
			return
		}
	}
	send(mergedEvent{cluster: cluster, cut: w.Cut()})
}

// pumpMerged sends the merged events to w until w stops, ctx ends, or a
// cluster's watch ends; cut closes when the cache cut one of them.
func (st *allStorage) pumpMerged(ctx context.Context, sel selection, w *watchStream, in <-chan mergedEvent, cut <-chan struct{}, pos map[string]string, members int, bookmarks, initialEnd bool) {
	ended := func() {
		st.s.m.cut.Inc()
		st.s.log.Info("replica: all-clusters watch cut: the client read slower than changes arrived", "kind", st.gvk().String(), "queue", st.s.cfg.Cache.QueueLength)
	}
	send := func(e watch.Event) bool {
		select {
		case w.result <- e:
			return true
		case <-cut:
			// Cut while the client was not reading this event: the
			// watch ends now, not once the client reads again.
			ended()
		case <-w.stop:
		case <-ctx.Done():
		}
		return false
	}
	pending := members
	if pending == 0 && initialEnd {
		b := bookmarkObject(st.gvk(), encodeComposite(pos))
		b.SetAnnotations(map[string]string{annotationInitialEventsEnd: "true"})
		if !send(watch.Event{Type: watch.Bookmark, Object: b}) {
			return
		}
	}
	bookmarked := encodeComposite(pos)
	tick := time.NewTicker(st.s.cfg.BookmarkInterval)
	defer tick.Stop()
	for {
		select {
		case m := <-in:
			switch {
			case m.initialDone:
				pos[m.cluster] = m.e.Pos
				pending--
				if pending == 0 && initialEnd {
					b := bookmarkObject(st.gvk(), encodeComposite(pos))
					b.SetAnnotations(map[string]string{annotationInitialEventsEnd: "true"})
					if !send(watch.Event{Type: watch.Bookmark, Object: b}) {
						return
					}
				}
				continue
			case m.e.Type == "": // the cluster's watch ended
				if m.cut {
					ended()
				}
				return
			}
			if _, started := pos[m.cluster]; started && m.e.Pos != "" {
				pos[m.cluster] = m.e.Pos
			}
			out, ok := sel.event(m.e)
			if !ok {
				continue
			}
			out.Object = tagged(out.Object.(*unstructured.Unstructured), m.cluster, encodeComposite(pos))
			if !send(out) {
				return
			}
			st.s.m.served.Inc()
		case <-tick.C:
			if cur := encodeComposite(pos); bookmarks && pending == 0 && cur != bookmarked {
				if !send(watch.Event{Type: watch.Bookmark, Object: bookmarkObject(st.gvk(), cur)}) {
					return
				}
				bookmarked = cur
			}
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}
