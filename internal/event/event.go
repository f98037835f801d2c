// Package event turns deltas into CloudEvents messages.
//
// The mapping is documented in docs/message-format.md. It is deterministic:
// the same delta always yields the same event id, so a delta published
// twice (after a crash, or by a retry) can be recognised downstream.
package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/internal/jsonenc"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
)

// TypePrefix starts every event type; the action follows it.
const TypePrefix = "io.kubebus.object."

// Encoder builds messages for one cluster.
type Encoder struct {
	// Cluster names the cluster in every message.
	Cluster string
	// KeepManagedFields keeps metadata.managedFields in objects the source
	// hands on raw (Delta.Raw); by default it is left out as the object
	// is copied into the event.
	KeepManagedFields bool
}

// Encode turns d into a message. It fails only when the object cannot be
// encoded as JSON. When d.ContentOmitted is set, the message is the one
// of the full delta, marked ContentOmitted, with data {"object": ...}
// holding only the object's identity (see docs/message-format.md).
func (e Encoder) Encode(d *source.Delta) (*sink.Message, error) {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	data := append((*buf)[:0], `{"object":`...)
	obj := d.Object
	if d.ContentOmitted {
		obj = identity(d)
	}
	var err error
	switch {
	// The API server escapes <, > and & as encoding/json does; they are
	// written as characters, as appendObject writes them.
	case d.Raw != nil && !d.ContentOmitted && e.KeepManagedFields:
		data = rawobject.AppendUnescapedHTML(data, d.Raw.Data)
	case d.Raw != nil && !d.ContentOmitted:
		data = d.Raw.Meta.AppendCutUnescapingHTML(data, d.Raw.Data)
	default:
		data, err = appendObject(data, obj)
	}
	if err != nil {
		return nil, fmt.Errorf("event: encode %s %s: %w", d.Resource.Name(), d.Key(), err)
	}
	if d.OldObject != nil && !d.ContentOmitted {
		data = append(data, `,"oldObject":`...)
		if data, err = appendObject(data, d.OldObject); err != nil {
			return nil, fmt.Errorf("event: encode old %s %s: %w", d.Resource.Name(), d.Key(), err)
		}
	}
	data = append(data, '}')
	if cap(data) <= maxPooledBuffer {
		*buf = data
	}

	action := string(d.Type)
	return &sink.Message{
		ID:              ID(d),
		Source:          Source(e.Cluster, d.Resource),
		Type:            TypePrefix + action,
		Subject:         d.Key(),
		Time:            d.Observed,
		Action:          action,
		Resource:        d.Resource.GroupVersionResource,
		ResourceVersion: d.ResourceVersion,
		UID:             string(d.UID),
		Kind:            d.Resource.Kind,
		APIVersion:      d.Resource.APIVersion(),
		Namespace:       d.Namespace,
		Name:            d.Name,
		Cluster:         e.Cluster,
		Snapshot:        d.Snapshot,
		ContentOmitted:  d.ContentOmitted,
		Data:            bytes.Clone(data),
	}, nil
}

// identity is the object of d reduced to what identifies it: apiVersion,
// kind, and metadata namespace, name, uid and resourceVersion. They come
// from d.Object when it has them, so that a delete found by a list keeps
// the last published resourceVersion there, as its full event does.
func identity(d *source.Delta) *unstructured.Unstructured {
	id := &unstructured.Unstructured{Object: map[string]any{}}
	id.SetAPIVersion(d.Resource.APIVersion())
	id.SetKind(d.Resource.Kind)
	id.SetNamespace(d.Namespace)
	id.SetName(d.Name)
	id.SetUID(d.UID)
	id.SetResourceVersion(d.ResourceVersion)
	if o := d.Object; o != nil {
		if v := o.GetAPIVersion(); v != "" {
			id.SetAPIVersion(v)
		}
		if v := o.GetKind(); v != "" {
			id.SetKind(v)
		}
		if v := o.GetUID(); v != "" {
			id.SetUID(v)
		}
		if v := o.GetResourceVersion(); v != "" {
			id.SetResourceVersion(v)
		}
	}
	return id
}

// buffers hold the data of messages being encoded; each message gets a
// copy of exactly its size. Buffers that grew past maxPooledBuffer (for a
// rare huge object) are left to the garbage collector.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuffer = 256 << 10

// appendObject appends obj as JSON, the bytes its MarshalJSON writes
// without the trailing newline; a nil obj is null.
func appendObject(dst []byte, obj *unstructured.Unstructured) ([]byte, error) {
	if obj == nil {
		return append(dst, "null"...), nil
	}
	return jsonenc.AppendValue(dst, obj.Object)
}

// ID is the event id of d: a hash of the resource, the object's identity
// (namespace, name, uid), its resourceVersion and the delta type. The same
// change always gets the same id; different changes get different ids.
func ID(d *source.Delta) string {
	var scratch [256]byte
	b := scratch[:0]
	for _, part := range [...]string{d.Resource.Name(), d.Namespace, d.Name, string(d.UID), d.ResourceVersion, string(d.Type)} {
		b = append(b, part...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Source is the event source of a resource's events:
// /clusters/<cluster>/api/v1/<resource> for the core group and
// /clusters/<cluster>/apis/<group>/<version>/<resource> for the others, the
// resource's path on the API server under the cluster's name.
func Source(cluster string, r source.Resource) string {
	if r.Group == "" {
		return "/clusters/" + cluster + "/api/" + r.Version + "/" + r.Resource
	}
	return "/clusters/" + cluster + "/apis/" + r.Group + "/" + r.Version + "/" + r.Resource
}
