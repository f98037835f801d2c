package consumer

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kubebus/bridge/wire"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// entry is what a ListerWatcher keeps per object key: no copy of the
// object, only what the dedupe rules compare.
type entry struct {
	rv  apiRV
	bus uint64 // hash of the bus key, for tombstones
	uid uid
	// held is true when the informer holds the object; false when it is
	// known only to tell its older states apart (it does not match the
	// label selector).
	held bool
}

// table is the per-key state of the objects of one list or watch: the
// bridge's dedupe rules applied to records, in bus order. It is not safe
// for concurrent use.
type table struct {
	opts  *Options
	keys  map[string]entry
	byBus map[uint64]string // bus key hash → object key
	gone  *deleted
	tm    typeMeta
	nheld int // entries with held set
}

func newTable(opts *Options) *table {
	return &table{opts: opts, keys: make(map[string]entry), byBus: make(map[uint64]string), gone: newDeleted()}
}

// change is one watch event a record makes.
type change struct {
	typ watch.EventType
	key string
	// obj is the object as the API server served it; nil for a Deleted
	// whose final state is unknown (last is then what was known of it).
	obj  *unstructured.Unstructured
	last entry
}

// outcome is what a record does to the table.
type outcome struct {
	drop dropReason // "" when the record was applied
	err  error      // why, for an invalid record
	// key is the object key the record changed, "" when none.
	key string
	// changes are the events for the informer, in order (at most two).
	changes []change
	// raw is the object's JSON when the informer holds it after the
	// record, for the snapshot.
	raw     json.RawMessage
	omitted bool // the event carried only the object's identity
}

// dropReason says why a record makes no change.
type dropReason string

const (
	dropDuplicate     dropReason = "duplicate"      // a state already applied, or older
	dropInvalid       dropReason = "invalid"        // undecodable, or not a bridge event
	dropForeign       dropReason = "foreign"        // another cluster or resource
	dropUnknownDelete dropReason = "unknown_delete" // a delete of an object not held
	dropNamespace     dropReason = "namespace"      // another namespace than Options.Namespace
)

// apply applies one record that is not a progress record.
func (t *table) apply(r Record) outcome {
	switch {
	case r.Err != nil:
		return outcome{drop: dropInvalid, err: r.Err}
	case r.Message == nil && r.Cluster != "" && r.Cluster != t.opts.Cluster:
		// The tombstone of another cluster's object under the same key:
		// bridges of several clusters may write to one Kafka topic.
		return outcome{drop: dropForeign, err: fmt.Errorf("tombstone of cluster %q", r.Cluster)}
	case r.Message == nil:
		return t.tombstone(r.Key)
	}
	m := r.Message
	if m.Cluster != t.opts.Cluster {
		return outcome{drop: dropForeign, err: fmt.Errorf("cluster %q", m.Cluster)}
	}
	if gr := m.Resource.GroupResource(); gr != t.opts.Resource {
		return outcome{drop: dropForeign, err: fmt.Errorf("resource %q", gr.String())}
	}
	if t.opts.Namespace != "" && m.Namespace != t.opts.Namespace {
		return outcome{drop: dropNamespace}
	}
	if err := checkMessage(m); err != nil {
		return outcome{drop: dropInvalid, err: err}
	}
	key := objectKey(m.Namespace, m.Name)
	u, rv := parseUID(m.UID), parseRV(m.ResourceVersion)
	deleting := m.Action == "deleted"
	// An object that left the bridge's view (BRIDGE_FILTER) still exists:
	// like one that leaves Options.LabelSelector, it is known at its
	// version, not gone, and takes its later states back.
	left := deleting && m.Reason == reasonLeftFilter
	e, tracked := t.keys[key]
	switch {
	case tracked && olderOrSame(rv, e, u, deleting):
		return outcome{drop: dropDuplicate}
	case !tracked && t.gone.stale(key, u, rv):
		return outcome{drop: dropDuplicate}
	case left && (!tracked || e.uid == u):
		out := outcome{key: key}
		if e.held {
			out.changes = append(out.changes, change{typ: watch.Deleted, key: key, last: e})
		}
		t.remember(key, entry{rv: rv, bus: hashKey(r.Key), uid: u})
		return out
	case deleting && !tracked:
		// A delete of an object the informer never got: nothing to
		// undo, but its late repeats must not bring it back.
		t.gone.add(key, u, rv)
		return outcome{drop: dropUnknownDelete}
	}
	obj, raw, err := decodeObject(m.Data)
	if err == nil {
		err = sameObject(obj, m)
	}
	if err != nil {
		return outcome{drop: dropInvalid, err: err}
	}
	if t.tm.kind == "" {
		t.tm = typeMeta{apiVersion: obj.GetAPIVersion(), kind: obj.GetKind()}
	}
	out := outcome{key: key, omitted: m.ContentOmitted}
	if deleting && e.uid != u {
		// The delete of another object under the key. The bridge dates
		// the delete of an object recreated unseen by its successor's
		// resourceVersion, so only the deleted object's own state tells
		// whether it lived after the held one: then the held one is gone
		// (a name is one object's at a time), and its delete was never
		// read, since the bus keeps only a key's last message.
		if c, ok := parseRV(obj.GetResourceVersion()).compare(e.rv); ok && c <= 0 {
			return outcome{drop: dropDuplicate}
		}
		if e.held {
			out.changes = append(out.changes, change{typ: watch.Deleted, key: key, last: e})
		}
		t.forget(key, e)
		t.gone.add(key, u, rv)
		return out
	}
	if deleting {
		if e.held {
			out.changes = append(out.changes, change{typ: watch.Deleted, key: key, obj: obj})
		}
		t.forget(key, e)
		t.gone.add(key, u, rv)
		return out
	}
	if tracked && e.uid != u {
		// Deleted and created again unseen: as an API server would, the
		// old object goes before the new one comes.
		if e.held {
			out.changes = append(out.changes, change{typ: watch.Deleted, key: key, last: e})
		}
		t.forget(key, e)
		t.gone.add(key, e.uid, e.rv)
		tracked, e = false, entry{}
	}
	selected := t.opts.selects(obj.GetLabels())
	switch {
	case selected && e.held:
		out.changes = append(out.changes, change{typ: watch.Modified, key: key, obj: obj})
	case selected:
		out.changes = append(out.changes, change{typ: watch.Added, key: key, obj: obj})
	case e.held:
		// It leaves the selector: deleted, in its new state.
		out.changes = append(out.changes, change{typ: watch.Deleted, key: key, obj: obj})
	}
	if selected {
		out.raw = raw
	}
	t.remember(key, entry{rv: rv, bus: hashKey(r.Key), uid: u, held: selected})
	return out
}

// olderOrSame reports whether a state (u, rv) of a tracked object is one
// already applied or older. resourceVersions are one clock for all
// objects of a cluster, so an older one is older whatever its uid.
func olderOrSame(rv apiRV, e entry, u uid, deleting bool) bool {
	c, ok := rv.compare(e.rv)
	if !ok {
		return false
	}
	if c < 0 {
		return true
	}
	// The same resourceVersion is the same change, except the delete of
	// that state (a delete may carry the last state's resourceVersion).
	// Another uid's delete at it is of the object the held one replaced:
	// the bridge dates the delete of an object recreated unseen by its
	// successor's resourceVersion.
	return c == 0 && (e.uid != u || !deleting)
}

// tombstone applies a record that says the object of a bus key is gone,
// of this cluster or of no cluster named. One that names none (a Kafka
// tombstone written by a bridge before tombstones named their cluster)
// is applied to the key's object as it was before: right when a single
// cluster writes to the bus, which is all such bridges supported.
func (t *table) tombstone(busKey string) outcome {
	key, ok := t.byBus[hashKey(busKey)]
	if !ok {
		// The usual case on Kafka: the bridge follows every delete event
		// with a tombstone, and compaction leaves tombstones alone. Not a
		// dropped record: there is nothing left to delete.
		return outcome{}
	}
	e := t.keys[key]
	if !e.held {
		// An object known but not held: it left the selector or the
		// bridge's filter, and this is the tombstone that follows the
		// delete of the latter. It still exists.
		return outcome{}
	}
	out := outcome{key: key}
	out.changes = append(out.changes, change{typ: watch.Deleted, key: key, last: e})
	t.forget(key, e)
	t.gone.add(key, e.uid, e.rv)
	return out
}

func (t *table) remember(key string, e entry) {
	if old, ok := t.keys[key]; ok {
		if old.bus != e.bus {
			delete(t.byBus, old.bus)
		}
		if old.held {
			t.nheld--
		}
	}
	if e.held {
		t.nheld++
	}
	t.keys[key] = e
	t.byBus[e.bus] = key
}

func (t *table) forget(key string, e entry) {
	if e.held {
		t.nheld--
	}
	delete(t.keys, key)
	if t.byBus[e.bus] == key {
		delete(t.byBus, e.bus)
	}
}

// reasonLeftFilter is the reason of the delete of an object that left the
// bridge's view (source.ReasonLeftFilter).
const reasonLeftFilter = "left-filter"

// checkMessage reports what makes m unusable as a bridge event.
func checkMessage(m *wire.Message) error {
	switch {
	case m.Name == "":
		return errors.New("event names no object")
	case m.UID == "":
		return fmt.Errorf("event for %s has no uid", objectKey(m.Namespace, m.Name))
	case m.Action != "added" && m.Action != "updated" && m.Action != "deleted":
		return fmt.Errorf("event for %s has action %q", objectKey(m.Namespace, m.Name), m.Action)
	}
	return nil
}

// sameObject reports an event whose object is not the one its attributes
// name.
func sameObject(u *unstructured.Unstructured, m *wire.Message) error {
	if u.GetName() != m.Name || u.GetNamespace() != m.Namespace || string(u.GetUID()) != m.UID {
		return fmt.Errorf("event for %s carries object %s uid %q", objectKey(m.Namespace, m.Name),
			objectKey(u.GetNamespace(), u.GetName()), u.GetUID())
	}
	return nil
}
