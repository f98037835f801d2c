package source

import (
	"fmt"
	"log/slog"
	"slices"
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
}

func newTracker(res Resource, prior map[string]checkpoint.Position, h Handler, keepOld bool, log *slog.Logger) *tracker {
	if prior == nil {
		prior = map[string]checkpoint.Position{}
	}
	return &tracker{res: res, prior: prior, handler: h, keepOld: keepOld, log: log, now: time.Now}
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
	if t.prior != nil {
		if pos, found := t.prior[d.Key()]; found {
			delete(t.prior, d.Key())
			switch {
			case pos.UID == string(d.UID) && pos.ResourceVersion == d.ResourceVersion:
				return // published before, unchanged since
			case pos.UID == string(d.UID):
				d.Type, d.Snapshot = Updated, true
			default:
				// Deleted and created again while the bridge was away.
				t.handler.OnDelta(t.vanished(d.Key(), pos))
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
			t.handler.OnDelta(t.vanished(ObjectKey(ns, name), checkpoint.Position{}))
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
// it reported.
func (t *tracker) finishInitialList() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.prior))
	for k := range t.prior {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.handler.OnDelta(t.vanished(k, t.prior[k]))
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
// position last published for it. Its object carries that identity.
func (t *tracker) vanished(key string, pos checkpoint.Position) Delta {
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
		ResourceVersion: pos.ResourceVersion,
		Observed:        t.now(),
		Snapshot:        true,
		Object:          u,
	}
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }
