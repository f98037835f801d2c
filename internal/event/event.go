// Package event turns deltas into CloudEvents messages.
//
// The mapping is documented in docs/message-format.md. It is deterministic:
// the same delta always yields the same event id, so a delta published
// twice (after a crash, or by a retry) can be recognised downstream.
package event

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/internal/jsonenc"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// Encoder builds messages for one cluster.
type Encoder struct {
	// Cluster names the cluster in every message.
	Cluster string
	// KeepManagedFields keeps metadata.managedFields in the objects that
	// the source hands on as the API server sent them (Delta.Raw); by
	// default the encoder leaves them out while it copies the object.
	// Objects the source parsed (Delta.Object, Delta.OldObject) are
	// written as they are: the source dropped the field already, unless
	// it keeps it too. Set from BRIDGE_KEEP_MANAGED_FIELDS, as the
	// source's option.
	KeepManagedFields bool
}

// Encode turns d into a message. It fails only when a parsed object cannot
// be encoded as JSON. When d.ContentOmitted is set, the message is the one
// of the full delta, marked ContentOmitted, with data {"object": ...}
// holding only the object's identity (see docs/message-format.md).
//
// The message holds its whole structured-mode event in one buffer
// (wire.Message.Encoded), with Data the sub-slice of it that holds the
// data, so that a sink sends either without copying. An object the API
// server sent (d.Raw) is copied into that buffer once, as it was sent,
// less its managedFields and the server's HTML escaping (see raw.go); the
// buffer is allocated once, at its size. A parsed object (d.Object) is
// written as encoding/json writes it without HTML escaping. Both make
// events equal as JSON values (test/equivalence).
//
// The buffer of a message from Encode is its own, for as long as anything
// holds it. The pipeline uses Lease instead, which writes the same bytes
// into a buffer lent by a pool and taken back after the sink is done with
// it.
func (e Encoder) Encode(d *source.Delta) (*wire.Message, error) {
	m := &wire.Message{}
	if _, err := e.write(m, d, func(n int) *[]byte {
		b := make([]byte, 0, n)
		return &b
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// write fills m from d and writes its event into a buffer that get
// returns for the event's size, and returns that buffer, holding the
// event; Encode and Lease differ only in where the buffer comes from. An
// event whose size is known beforehand (rawOnly) is written there
// directly, its head measured first; one holding parsed objects is
// written into a pooled scratch buffer, then copied at its size.
func (e Encoder) write(m *wire.Message, d *source.Delta, get func(n int) *[]byte) (*[]byte, error) {
	e.fill(m, d)
	if rawOnly(d) {
		var scratch [512]byte
		head := m.AppendHead(scratch[:0])
		buf := get(len(head) + len(`{"object":}}`) + e.rawLen(d))
		b := append((*buf)[:0], head...)
		start := len(b)
		b = append(b, `{"object":`...)
		b = e.appendRaw(b, d)
		b = append(b, '}')
		end := len(b)
		b = append(b, '}')
		*buf = b
		m.Encoded, m.Data = b, b[start:end:end]
		return buf, nil
	}
	scratch := buffers.Get().(*[]byte)
	defer buffers.Put(scratch)
	b, start, end, err := e.appendParsed((*scratch)[:0], m, d)
	if cap(b) <= maxPooledBuffer {
		*scratch = b[:0]
	}
	if err != nil {
		return nil, err
	}
	buf := get(len(b))
	ev := append((*buf)[:0], b...)
	*buf = ev
	m.Encoded, m.Data = ev, ev[start:end:end]
	return buf, nil
}

// rawOnly reports whether the event of d holds the object the API server
// sent and nothing parsed: its size is then known before it is written.
func rawOnly(d *source.Delta) bool {
	return d.Raw != nil && !d.ContentOmitted && d.OldObject == nil
}

// appendParsed appends the event of m, whose data holds at least one
// parsed object (d.Object, d.OldObject, or the identity of a delta whose
// content is omitted), to b, and returns b with the data's bounds in it.
func (e Encoder) appendParsed(b []byte, m *wire.Message, d *source.Delta) (_ []byte, start, end int, err error) {
	b = m.AppendHead(b)
	start = len(b)
	b = append(b, `{"object":`...)
	switch {
	case d.ContentOmitted:
		b, err = appendObject(b, identity(d))
	case d.Raw != nil:
		b = e.appendRaw(b, d)
	default:
		b, err = appendObject(b, d.Object)
	}
	if err != nil {
		return b, 0, 0, fmt.Errorf("event: encode %s %s: %w", d.Resource.Name(), d.Key(), err)
	}
	if d.OldObject != nil && !d.ContentOmitted {
		b = append(b, `,"oldObject":`...)
		if b, err = appendObject(b, d.OldObject); err != nil {
			return b, 0, 0, fmt.Errorf("event: encode old %s %s: %w", d.Resource.Name(), d.Key(), err)
		}
	}
	b = append(b, '}')
	end = len(b)
	b = append(b, '}')
	return b, start, end, nil
}

// fill sets m to the message of d without its data.
func (e Encoder) fill(m *wire.Message, d *source.Delta) {
	*m = wire.Message{
		Time:            d.Observed,
		Action:          string(d.Type),
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
		Reason:          string(d.Reason),
		View:            d.View,
	}
	m.Derive()
}

// identity is the object of d reduced to what identifies it: apiVersion,
// kind, and metadata namespace, name, uid and resourceVersion. They come
// from the object when it has them (d.Raw as scanned, or d.Object), so
// that a delete found by a list keeps the last published resourceVersion
// there, as its full event does.
func identity(d *source.Delta) *unstructured.Unstructured {
	id := &unstructured.Unstructured{Object: map[string]any{}}
	id.SetAPIVersion(d.Resource.APIVersion())
	id.SetKind(d.Resource.Kind)
	id.SetNamespace(d.Namespace)
	id.SetName(d.Name)
	id.SetUID(d.UID)
	id.SetResourceVersion(d.ResourceVersion)
	var apiVersion, kind, uid, rv string
	switch {
	case d.Object != nil:
		o := d.Object
		apiVersion, kind, uid, rv = o.GetAPIVersion(), o.GetKind(), string(o.GetUID()), o.GetResourceVersion()
	case d.Raw != nil:
		m := d.Raw.Meta()
		apiVersion, kind, uid, rv = m.APIVersion, m.Kind, m.UID, m.ResourceVersion
	}
	if apiVersion != "" {
		id.SetAPIVersion(apiVersion)
	}
	if kind != "" {
		id.SetKind(kind)
	}
	if uid != "" {
		id.SetUID(types.UID(uid))
	}
	if rv != "" {
		id.SetResourceVersion(rv)
	}
	return id
}

// buffers hold the events being encoded from parsed objects; each message
// gets a copy of them, of exactly its size (Encode) or in a buffer of the
// pool of its size (Lease). Buffers that grew past maxPooledBuffer
// (for a rare huge object) are left to the garbage collector.
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
