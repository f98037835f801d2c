package source

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/checkpoint"
)

// tracker turns one resource's informer callbacks into deltas. Until the
// initial lists of all its informers are done, it also holds the checkpoint
// of what was published before, so that it can tell unchanged objects from
// changed ones and find objects deleted while the bridge was down.
type tracker struct {
	res     Resource
	handler Handler
	keepOld bool
	log     *slog.Logger
	now     func() time.Time

	mu sync.Mutex
	// prior holds checkpointed positions not yet matched by a listed
	// object. It is nil once the initial diff is done.
	prior map[string]checkpoint.Position
	// listRV is the resourceVersion of the latest list of each informer,
	// by its namespace ("" for all namespaces); relisted marks informers
	// that listed again after their first list.
	listRV   map[string]string
	relisted map[string]bool
}

func newTracker(res Resource, prior map[string]checkpoint.Position, h Handler, keepOld bool, log *slog.Logger) *tracker {
	if prior == nil {
		prior = map[string]checkpoint.Position{}
	}
	return &tracker{res: res, prior: prior, handler: h, keepOld: keepOld, log: log, now: time.Now,
		listRV: map[string]string{}, relisted: map[string]bool{}}
}

// listed records a complete list by the informer of namespace ns ("" for
// all namespaces) at resourceVersion rv; again is true for a relist.
func (t *tracker) listed(ns, rv string, again bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.listRV[ns] = rv
	if again {
		t.relisted[ns] = true
	}
}

// fromRelist reports whether a change to u came from a relist rather than
// the watch: its informer has relisted, and u is no newer than that list.
// Changes the watch reports after the list are newer than it. Called with
// t.mu held.
func (t *tracker) fromRelist(u *unstructured.Unstructured) bool {
	ns := u.GetNamespace()
	if _, ok := t.listRV[ns]; !ok {
		ns = ""
	}
	if !t.relisted[ns] {
		return false
	}
	return !rvBefore(t.listRV[ns], u.GetResourceVersion())
}

// newestList is the highest resourceVersion of the informers' latest
// lists. Called with t.mu held.
func (t *tracker) newestList() string {
	newest := ""
	for _, rv := range t.listRV {
		if newest == "" || rvBefore(newest, rv) {
			newest = rv
		}
	}
	return newest
}

// rvBefore reports whether resourceVersion a is older than b. They are
// opaque strings to Kubernetes clients, but etcd makes them integers; when
// either does not parse, nothing is known and rvBefore is false.
func rvBefore(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// eventHandler returns the informer event handler for this resource.
func (t *tracker) eventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    t.onAdd,
		UpdateFunc: t.onUpdate,
		DeleteFunc: t.onDelete,
	}
}

func (t *tracker) onAdd(obj any, initial bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		t.log.Error("ignoring object of unexpected type", "resource", t.res.Name(), "type", typeName(obj))
		return
	}
	d := t.delta(Added, u, initial)

	t.mu.Lock()
	defer t.mu.Unlock()
	if !initial && t.fromRelist(u) {
		d.Snapshot = true
	}
	if t.prior != nil {
		if pos, found := t.prior[d.Key()]; found {
			delete(t.prior, d.Key())
			switch {
			case pos.UID == string(d.UID) && pos.ResourceVersion == d.ResourceVersion:
				return // published before, unchanged since
			case pos.UID == string(d.UID) && pos.ResourceVersion == "":
				// An intent: the object may or may not have been
				// published; publish it as created.
				d.Snapshot = true
			case pos.UID == string(d.UID):
				d.Type, d.Snapshot = Updated, true
			default:
				// Deleted and created again while the bridge was away: the
				// old object was gone before the new one was made.
				t.handler.OnDelta(t.vanished(d.Key(), pos, d.ResourceVersion))
				d.Snapshot = true
			}
		}
	}
	t.handler.OnDelta(d)
}

func (t *tracker) onUpdate(oldObj, newObj any) {
	u, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		t.log.Error("ignoring object of unexpected type", "resource", t.res.Name(), "type", typeName(newObj))
		return
	}
	old, _ := oldObj.(*unstructured.Unstructured)
	if old != nil && old.GetResourceVersion() == u.GetResourceVersion() {
		return // a resync: nothing changed
	}
	d := t.delta(Updated, u, false)
	if t.keepOld {
		d.OldObject = old
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d.Snapshot = t.fromRelist(u)
	t.handler.OnDelta(d)
}

func (t *tracker) onDelete(obj any) {
	snapshot := false
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// The informer missed the delete and found out on a relist; what
		// it has is the last state it knew.
		snapshot = true
		obj = tomb.Obj
		if _, ok := obj.(*unstructured.Unstructured); !ok {
			ns, name, err := cache.SplitMetaNamespaceKey(tomb.Key)
			if err != nil {
				t.log.Error("dropping delete with unusable key", "resource", t.res.Name(), "key", tomb.Key, "err", err)
				return
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			t.handler.OnDelta(t.vanished(ObjectKey(ns, name), checkpoint.Position{}, t.newestList()))
			return
		}
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		t.log.Error("ignoring object of unexpected type", "resource", t.res.Name(), "type", typeName(obj))
		return
	}
	d := t.delta(Deleted, u, snapshot)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handler.OnDelta(d)
}

// finishInitialList reports every checkpointed object that no informer
// listed as deleted, and ends the initial diff. It returns how many deletes
// it reported. The deletes carry the resourceVersion of the list that
// found the objects gone, so that an object's resourceVersions never go
// backwards in the stream, even when its live delete was published before
// a crash and not checkpointed.
func (t *tracker) finishInitialList() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.prior))
	for k := range t.prior {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rv := t.newestList()
	for _, k := range keys {
		t.handler.OnDelta(t.vanished(k, t.prior[k], rv))
	}
	t.prior = nil
	return len(keys)
}

func (t *tracker) delta(typ DeltaType, u *unstructured.Unstructured, snapshot bool) Delta {
	return Delta{
		Type:            typ,
		Resource:        t.res,
		Namespace:       u.GetNamespace(),
		Name:            u.GetName(),
		UID:             u.GetUID(),
		ResourceVersion: u.GetResourceVersion(),
		Observed:        t.now(),
		Snapshot:        snapshot,
		Object:          u,
	}
}

// vanished is the delete of an object known only by its key and the
// position last published for it. Its object carries that identity; the
// delta carries rv, a resourceVersion by which the object was gone (the
// last published one when rv is empty).
func (t *tracker) vanished(key string, pos checkpoint.Position, rv string) Delta {
	if rv == "" {
		rv = pos.ResourceVersion
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(t.res.APIVersion())
	u.SetKind(t.res.Kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if pos.UID != "" {
		u.SetUID(types.UID(pos.UID))
	}
	if pos.ResourceVersion != "" {
		u.SetResourceVersion(pos.ResourceVersion)
	}
	return Delta{
		Type:            Deleted,
		Resource:        t.res,
		Namespace:       ns,
		Name:            name,
		UID:             types.UID(pos.UID),
		ResourceVersion: rv,
		Observed:        t.now(),
		Snapshot:        true,
		Object:          u,
	}
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }
