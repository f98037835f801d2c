package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SpecVersion is the CloudEvents version of every message.
const SpecVersion = "1.0"

// ContentType is the media type of a message's data.
const ContentType = "application/json"

// StructuredContentType is the media type of a whole event in structured
// mode, as the CloudEvents JSON format names it.
const StructuredContentType = "application/cloudevents+json"

// Actions: what happened to the object, the last part of a message's type.
const (
	ActionAdded   = "added"
	ActionUpdated = "updated"
	ActionDeleted = "deleted"
)

// Message is one change to one Kubernetes object, as a CloudEvents 1.0
// event. Its fields are the event's attributes (see Attributes); Data is
// its payload.
//
// The same change always produces the same ID, so consumers and buses can
// drop repeats of it.
//
// The bytes of a message the bridge hands to a sink (Encoded, Data, and
// every slice of them) are lent, not given: the bridge writes later events
// into the same buffers once Publish returned. A sink must not keep any
// reference to them after Publish returns, nor leave one with a library
// that may still read it (a client that sends, or sends again, later):
// what must outlive the call is copied (see sink.Sink). While Publish runs
// the bytes do not change, and a message sent again after a failure is the
// same message. When the bridge takes the bytes back it sets Encoded and
// Data to nil; the message's other fields do not change.
type Message struct {
	// ID is derived from the object's uid, its resourceVersion and Action
	// (see ID).
	ID string
	// Source names the cluster and the resource the object belongs to
	// (see Source).
	Source string
	// Type is the event type: TypePrefix + Action (see Type).
	Type string
	// Subject is "namespace/name", or "name" for cluster-scoped objects.
	Subject string
	// Time is when the bridge observed the change.
	Time time.Time

	// Action is ActionAdded, ActionUpdated or ActionDeleted. It is not an
	// attribute of its own: decoding reads it from Type.
	Action string
	// Resource is the object's resource. Sinks use it to route messages
	// (subjects, topics); it is not an event attribute of its own:
	// decoding reads it from Source and APIVersion.
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
	// Reason says why an object that still exists is reported deleted, or
	// why a state is published again: "left-filter" when it no longer
	// matches the bridge's filter (BRIDGE_FILTER), "reconciled" when the
	// bridge repairs what the bus holds. It is the "reason" attribute,
	// present only when set; deletes of objects deleted in the cluster
	// have none.
	Reason string

	// View is the object's state in the bridge's view (BRIDGE_FILTER,
	// BRIDGE_FIELDS, BRIDGE_DROP_FIELDS), opaque; "" without a view and
	// for deletes. It is not an event attribute: a sink whose bus keeps
	// each object's latest message (a state layout) stores it beside the
	// event, as a header (Binding.ViewHeader), so that the bridge reads
	// back under which view each object was published.
	View string

	// Data is the JSON payload: {"object": ...}, plus "oldObject" on updates
	// when the bridge is configured to include it. It must be valid JSON:
	// MarshalJSON writes it as it is.
	Data json.RawMessage

	// Encoded is the whole structured-mode event, when the encoder wrote
	// it in one buffer (the bridge's encoder does): the bytes MarshalJSON
	// writes, with Data the sub-slice that holds the data, the event's
	// last member. MarshalJSON then returns Encoded itself, without
	// copying, so that a sink sends the event as it was written; it does
	// so only while Data is still that sub-slice, so a copy of the message
	// that replaces Data gets an encoding of its own. Whoever changes an
	// attribute of an encoded message must set Encoded to nil. Never
	// modify its bytes, and keep none of them past Publish (see above).
	Encoded []byte
}

// Key is the object's identity within its resource: "namespace/name", or
// "name" for cluster-scoped objects. All messages about one object share a
// key, and sinks that partition use it to keep them in order.
func (m *Message) Key() string { return m.Subject }

// MarshalJSON encodes the message as a CloudEvents structured-mode event:
// the attributes in the order of Attributes, each left out that is
// optional and unset, and "data" last. Data is written as it is, so it
// must be valid JSON (the bridge's encoder writes it compact, as
// encoding/json does); an empty Data is null. The attributes are escaped
// as encoding/json escapes strings with HTML escaping off ("<", ">" and
// "&" are written as they are), so the event is byte for byte what a
// json.Encoder with SetEscapeHTML(false) makes of it. It never fails.
//
// When the message holds its encoding (Encoded, with Data its sub-slice),
// MarshalJSON returns it as it is, without copying: the caller must not
// modify it, nor, in a sink, keep it past Publish.
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
	b = append(b, '{')
	for i, a := range attributes {
		if !a.present(m) {
			continue
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, a.member...)
		b = a.appendJSON(b, m)
	}
	return append(b, `,"data":`...)
}

// HeadLen is room enough for what AppendHead appends, unless the
// attributes hold many characters that JSON escapes: it sizes the buffer
// of an event.
func (m *Message) HeadLen() int {
	n := structuredOverhead
	for _, a := range attributes {
		if a.kind == kindString {
			n += len(*a.str(m))
		}
	}
	return n
}

// structuredOverhead is what AppendHead writes besides the values of the
// string attributes: names, punctuation, the time, and some room for
// escapes.
const structuredOverhead = 320

// UnmarshalJSON decodes a CloudEvents structured-mode event, as
// MarshalJSON writes it: every attribute of Attributes by its name, as
// encoding/json matches names (members it does not know are ignored),
// then Action and Resource from the type, the source and the apiversion.
// Consumers and tests use it to read buses back.
func (m *Message) UnmarshalJSON(b []byte) error {
	v := reflect.New(structured)
	if err := json.Unmarshal(b, v.Interface()); err != nil {
		return fmt.Errorf("wire: decode event: %w", err)
	}
	v = v.Elem()
	var d decoder
	for _, a := range attributes {
		f := v.Field(a.index)
		if a.kind == kindBool {
			*a.flag(&d.msg) = f.Bool()
			continue
		}
		if err := d.set(a, f.String()); err != nil {
			return fmt.Errorf("wire: decode event %q: %w", d.msg.ID, err)
		}
	}
	d.msg.Data = v.Field(len(attributes)).Bytes()
	if err := d.finish(); err != nil {
		return err
	}
	*m = d.msg
	return nil
}

// structured is the type encoding/json decodes a structured-mode event
// into: a field per attribute of the table, in its order, named by its
// json tag, and data last.
var structured = func() reflect.Type {
	fields := make([]reflect.StructField, 0, len(attributes)+1)
	for _, a := range attributes {
		t := reflect.TypeFor[string]()
		if a.kind == kindBool {
			t = reflect.TypeFor[bool]()
		}
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("A%d", a.index), Type: t, Tag: reflect.StructTag(`json:"` + a.name + `"`),
		})
	}
	fields = append(fields, reflect.StructField{Name: "Data", Type: reflect.TypeFor[json.RawMessage](), Tag: `json:"data"`})
	return reflect.StructOf(fields)
}()

// decoder builds a Message from its attributes' text, in either mode.
type decoder struct {
	msg         Message
	specVersion string
}

// set sets attribute a from its text form: a member of the structured
// form, or a binary-mode header, unescaped.
func (d *decoder) set(a *Attribute, v string) error {
	m := &d.msg
	switch a.kind {
	case kindFixed:
		if a.name == "specversion" {
			d.specVersion = v
		}
	case kindTime:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fmt.Errorf("time: %w", err)
		}
		m.Time = t
	case kindBool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		*a.flag(m) = b
	default:
		*a.str(m) = v
	}
	return nil
}

// finish checks what every event must have and derives Action and
// Resource.
func (d *decoder) finish() error {
	m := &d.msg
	if d.specVersion != SpecVersion {
		return fmt.Errorf("wire: decode event %q: specversion %q, want %q", m.ID, d.specVersion, SpecVersion)
	}
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil {
		return fmt.Errorf("wire: decode event %q: apiversion: %w", m.ID, err)
	}
	m.Action = actionOf(m.Type)
	m.Resource = gv.WithResource(resourceOf(m.Source))
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
