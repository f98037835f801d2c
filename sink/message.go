package sink

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/jsonenc"
)

// SpecVersion is the CloudEvents version of every message.
const SpecVersion = "1.0"

// ContentType is the media type of a message's data.
const ContentType = "application/json"

// Message is one change to one Kubernetes object, as a CloudEvents 1.0
// event. Its fields are the event's attributes; Data is its payload.
//
// The same change always produces the same ID, so consumers and buses can
// drop repeats of it.
type Message struct {
	// ID is derived from the object's uid, its resourceVersion and Action.
	ID string
	// Source names the cluster and the resource the object belongs to.
	Source string
	// Type is the event type; it ends in "." + Action.
	Type string
	// Subject is "namespace/name", or "name" for cluster-scoped objects.
	Subject string
	// Time is when the bridge observed the change.
	Time time.Time

	// Action is "added", "updated" or "deleted".
	Action string
	// Resource is the object's resource. Sinks use it to route messages
	// (subjects, topics); it is not an event attribute of its own.
	Resource schema.GroupVersionResource

	// Extension attributes.
	ResourceVersion string
	UID             string
	Kind            string
	APIVersion      string
	Namespace       string
	Name            string
	Cluster         string
	// Snapshot is true when the change was found by comparing a (re)list of
	// the resource with what the bridge published before, rather than seen
	// on a watch.
	Snapshot bool
	// ContentOmitted is true when the event carries only the object's
	// identity, because the full event is larger than the bus takes: Data
	// is {"object": {...}} with the object's apiVersion, kind, and
	// metadata namespace, name, uid and resourceVersion, and nothing else.
	// It is the "contentomitted" attribute, present only when true.
	ContentOmitted bool
	// Reason says why an object that still exists is reported deleted:
	// "left-filter" when it no longer matches the bridge's filter
	// (BRIDGE_FILTER). It is the "reason" attribute, present only when
	// set; deletes of objects deleted in the cluster have none.
	Reason string

	// View is the object's state in the bridge's view (BRIDGE_FILTER,
	// BRIDGE_FIELDS, BRIDGE_DROP_FIELDS), opaque; "" without a view and
	// for deletes. It is not an event attribute: a sink whose bus keeps
	// each object's latest message (a state layout) stores it beside the
	// event, as a header, so that the bridge reads back under which view
	// each object was published (StateReader).
	View string

	// Data is the JSON payload: {"object": ...}, plus "oldObject" on updates
	// when the bridge is configured to include it. It must be valid JSON:
	// MarshalJSON writes it as it is.
	Data json.RawMessage

	// Encoded is the whole structured-mode event, when the encoder wrote
	// it in one buffer (internal/event does): the bytes MarshalJSON
	// writes, with Data the sub-slice that holds the data, the event's
	// last member. MarshalJSON then returns Encoded itself, without
	// copying, so that a sink sends the event as it was written; it does
	// so only while Data is still that sub-slice, so a copy of the message
	// that replaces Data gets an encoding of its own. Whoever changes an
	// attribute of an encoded message must set Encoded to nil. Never
	// modify its bytes.
	Encoded []byte
}

// Key is the object's identity within its resource: "namespace/name", or
// "name" for cluster-scoped objects. All messages about one object share a
// key, and sinks that partition use it to keep them in order.
func (m *Message) Key() string { return m.Subject }

// structured is the JSON form of a Message in CloudEvents structured mode,
// as UnmarshalJSON reads it and MarshalJSON writes it.
type structured struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	ResourceVersion string          `json:"resourceversion"`
	UID             string          `json:"uid"`
	Kind            string          `json:"kind"`
	APIVersion      string          `json:"apiversion"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name"`
	Cluster         string          `json:"cluster"`
	Snapshot        bool            `json:"snapshot"`
	ContentOmitted  bool            `json:"contentomitted,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Data            json.RawMessage `json:"data"`
}

// MarshalJSON encodes the message as a CloudEvents structured-mode event,
// the attributes in the order of the structured type and Data last. Data
// is written as it is, so it must be valid JSON (the bridge's encoder
// writes it compact, as encoding/json does); an empty Data is null. The
// attributes are escaped as encoding/json escapes strings with HTML
// escaping off ("<", ">" and "&" are written as they are), so the event
// is byte for byte what a json.Encoder with SetEscapeHTML(false) makes of
// it. It never fails.
//
// When the message holds its encoding (Encoded, with Data its sub-slice),
// MarshalJSON returns it as it is, without copying: the caller must not
// modify it.
func (m *Message) MarshalJSON() ([]byte, error) {
	if m.encoded() {
		return m.Encoded, nil
	}
	b := make([]byte, 0, m.HeadLen()+len(m.Data)+1)
	b = m.AppendHead(b)
	if len(m.Data) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, m.Data...)
	}
	return append(b, '}'), nil
}

// encoded reports whether Encoded holds the message's event: Data is its
// sub-slice, right before the closing brace.
func (m *Message) encoded() bool {
	n, d := len(m.Encoded), len(m.Data)
	return d > 0 && n > d && &m.Encoded[n-1-d] == &m.Data[0] && m.Encoded[n-1] == '}'
}

// AppendHead appends to b the start of the message's structured-mode
// event, as MarshalJSON writes it: "{", every attribute, and the name of
// data, up to its value. The data and a closing "}" complete the event.
func (m *Message) AppendHead(b []byte) []byte {
	b = append(b, `{"specversion":"`+SpecVersion+`","id":`...)
	b = jsonenc.AppendString(b, m.ID)
	b = append(b, `,"source":`...)
	b = jsonenc.AppendString(b, m.Source)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, m.Type)
	b = append(b, `,"subject":`...)
	b = jsonenc.AppendString(b, m.Subject)
	// RFC 3339 holds nothing a JSON string escapes.
	b = append(b, `,"time":"`...)
	b = m.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","datacontenttype":"`+ContentType+`","resourceversion":`...)
	b = jsonenc.AppendString(b, m.ResourceVersion)
	b = append(b, `,"uid":`...)
	b = jsonenc.AppendString(b, m.UID)
	b = append(b, `,"kind":`...)
	b = jsonenc.AppendString(b, m.Kind)
	b = append(b, `,"apiversion":`...)
	b = jsonenc.AppendString(b, m.APIVersion)
	if m.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = jsonenc.AppendString(b, m.Namespace)
	}
	b = append(b, `,"name":`...)
	b = jsonenc.AppendString(b, m.Name)
	b = append(b, `,"cluster":`...)
	b = jsonenc.AppendString(b, m.Cluster)
	b = append(b, `,"snapshot":`...)
	b = strconv.AppendBool(b, m.Snapshot)
	if m.ContentOmitted {
		b = append(b, `,"contentomitted":true`...)
	}
	if m.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonenc.AppendString(b, m.Reason)
	}
	return append(b, `,"data":`...)
}

// HeadLen is room enough for what AppendHead appends, unless the
// attributes hold many characters that JSON escapes: it sizes the buffer
// of an event.
func (m *Message) HeadLen() int {
	return len(m.ID) + len(m.Source) + len(m.Type) + len(m.Subject) + len(m.ResourceVersion) + len(m.UID) +
		len(m.Kind) + len(m.APIVersion) + len(m.Namespace) + len(m.Name) + len(m.Cluster) + len(m.Reason) + structuredOverhead
}

// structuredOverhead is what AppendHead writes besides the values of the
// string attributes: names, punctuation, the time, and some room for
// escapes.
const structuredOverhead = 320

// UnmarshalJSON decodes a CloudEvents structured-mode event written by
// MarshalJSON. Consumers and tests use it to read streams back.
func (m *Message) UnmarshalJSON(b []byte) error {
	var s structured
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("sink: decode event: %w", err)
	}
	if s.SpecVersion != SpecVersion {
		return fmt.Errorf("sink: decode event %q: specversion %q, want %q", s.ID, s.SpecVersion, SpecVersion)
	}
	t, err := time.Parse(time.RFC3339Nano, s.Time)
	if err != nil {
		return fmt.Errorf("sink: decode event %q: time: %w", s.ID, err)
	}
	gv, err := schema.ParseGroupVersion(s.APIVersion)
	if err != nil {
		return fmt.Errorf("sink: decode event %q: apiversion: %w", s.ID, err)
	}
	*m = Message{
		ID:              s.ID,
		Source:          s.Source,
		Type:            s.Type,
		Subject:         s.Subject,
		Time:            t,
		Action:          actionOf(s.Type),
		Resource:        gv.WithResource(resourceOf(s.Source)),
		ResourceVersion: s.ResourceVersion,
		UID:             s.UID,
		Kind:            s.Kind,
		APIVersion:      s.APIVersion,
		Namespace:       s.Namespace,
		Name:            s.Name,
		Cluster:         s.Cluster,
		Snapshot:        s.Snapshot,
		ContentOmitted:  s.ContentOmitted,
		Reason:          s.Reason,
		Data:            s.Data,
	}
	return nil
}

// actionOf returns what follows the last dot of an event type.
func actionOf(eventType string) string {
	for i := len(eventType) - 1; i >= 0; i-- {
		if eventType[i] == '.' {
			return eventType[i+1:]
		}
	}
	return eventType
}

// resourceOf returns the last path segment of an event source.
func resourceOf(source string) string {
	for i := len(source) - 1; i >= 0; i-- {
		if source[i] == '/' {
			return source[i+1:]
		}
	}
	return source
}
