package source

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
)

// DeltaType says what happened to an object.
type DeltaType string

// The kinds of change a Delta reports.
const (
	Added   DeltaType = "added"
	Updated DeltaType = "updated"
	Deleted DeltaType = "deleted"
)

// Resource is a resolved API resource.
type Resource struct {
	schema.GroupVersionResource
	// Kind is the kind of the resource's objects, such as "ConfigMap".
	Kind string
	// Namespaced is false for cluster-scoped resources.
	Namespaced bool
}

// Name is the resource's version-independent name, "configmaps" or
// "deployments.apps". Checkpoints are kept under it, so that changing the
// version the bridge watches does not lose them.
func (r Resource) Name() string { return r.GroupResource().String() }

// APIVersion is "v1" or "apps/v1".
func (r Resource) APIVersion() string { return r.GroupVersion().String() }

// Delta is one change to one object.
type Delta struct {
	Type     DeltaType
	Resource Resource

	Namespace       string
	Name            string
	UID             types.UID
	ResourceVersion string

	// Observed is when the bridge saw the change.
	Observed time.Time
	// Snapshot is true for deltas found by comparing a list of the resource
	// with what was published before (on start, or after a relist), rather
	// than reported by a watch.
	Snapshot bool

	// Object is the object's state after the change, or its final state for
	// Deleted (for a delete found by a list, only its identity). Never
	// modify it: with Options.OldObject it becomes the next update's
	// OldObject.
	Object *unstructured.Unstructured
	// OldObject is the state before an update, when the source is configured
	// to keep it; otherwise nil.
	OldObject *unstructured.Unstructured
	// Raw is the object's state as the API server sent it, when the source
	// runs its raw path: Object is then nil. A delta has Raw or Object,
	// never both; deletes found by a list carry an identity-only Object
	// either way.
	Raw *RawObject

	// ContentOmitted asks for an event that carries only the object's
	// identity (its apiVersion, kind, namespace, name, uid and
	// resourceVersion), marked so: the pipeline sets it when the full
	// event is larger than the bus takes. The source never does.
	ContentOmitted bool

	// View is the object's state in the view the source applies (see
	// View), recorded with its position once the delta is published, so
	// that a restart compares the object with what the view published;
	// "" without a view, and for deletes.
	View string
	// Reason says why a delta was made other than for a change in the
	// cluster: a Deleted delta of an object that still exists, or a
	// repair of the bus; "" for a change in the cluster.
	Reason Reason
}

// Reason is why a delta was made other than for a change in the cluster.
type Reason string

const (
	// ReasonLeftFilter: the object no longer matches the view's filter, so
	// it left the stream, which is a view of the objects that match.
	ReasonLeftFilter Reason = "left-filter"
	// ReasonReconciled: the bus did not hold what the cluster does (see
	// Options.Bus), and the delta repairs it: the delete of an object the
	// bus held and the cluster lacks, or the current state of an object
	// the bus lacked or held at an older state.
	ReasonReconciled Reason = "reconciled"
)

// RawObject is an object's JSON exactly as the API server sent it
// (metadata.managedFields included), and what a scan of it read: its
// identity (Meta), and where managedFields lies, so that an encoder copies
// the object once, leaving managedFields out, straight into an event. One
// made by the source or by NewRawObject holds one valid JSON object. A
// RawObject is never modified, so it may be shared between goroutines.
type RawObject struct {
	data []byte
	scan rawobject.Meta
}

// RawMeta is an object's identity, as its JSON gives it. Fields the JSON
// lacks are empty: the items of a list of built-in objects come without
// apiVersion and kind.
type RawMeta struct {
	APIVersion string
	Kind       string

	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
}

// NewRawObject checks that data is one JSON object, and reads its
// identity and where its metadata.managedFields lies, for a View that
// makes objects of its own (a projection). The RawObject keeps data:
// never modify it afterwards.
func NewRawObject(data []byte) (*RawObject, error) {
	m, err := rawobject.Scan(data)
	if err != nil {
		return nil, fmt.Errorf("source: raw object: %w", err)
	}
	return &RawObject{data: data, scan: m}, nil
}

// Data is the object's JSON. Never modify it.
func (o *RawObject) Data() []byte { return o.data }

// Meta is the object's identity, as its JSON gives it.
func (o *RawObject) Meta() RawMeta {
	m := &o.scan
	return RawMeta{APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name,
		UID: m.UID, ResourceVersion: m.ResourceVersion}
}

func init() {
	rawaccess.Meta = func(raw any) *rawobject.Meta { return &raw.(*RawObject).scan }
	rawaccess.New = func(data []byte, m rawobject.Meta) any { return &RawObject{data: data, scan: m} }
}

// Key is the object's identity within its resource: "namespace/name", or
// "name" for cluster-scoped objects.
func (d *Delta) Key() string { return ObjectKey(d.Namespace, d.Name) }

// ObjectKey is "namespace/name", or "name" when namespace is empty.
func ObjectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Handler receives deltas.
//
// OnDelta is called from informer goroutines, possibly several at once for
// different objects, but never concurrently for one object. It must not
// block on I/O. It may wait to hold the source back (the pipeline does
// while its deltas not done fill its memory budget; see Holder): the
// informer reads nothing meanwhile, which the source's watchdog does not
// take for the API server's silence, and a watch held up long enough for
// the API server to drop it is resumed from its last resourceVersion, or
// listed again, as after any dropped watch.
type Handler interface {
	OnDelta(Delta)
}

// Holder is a Handler that may hold its callers, waiting for room (see
// Handler). A Set calls StopHolding as it begins to stop, before it waits
// for its watches to end, so that a downstream that takes nothing more
// cannot keep it from stopping: every OnDelta held returns, and every
// later one returns at once.
type Holder interface {
	Handler
	StopHolding()
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(Delta)

// OnDelta calls f(d).
func (f HandlerFunc) OnDelta(d Delta) { f(d) }
