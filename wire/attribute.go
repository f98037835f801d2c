package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/kubebus/bridge/internal/jsonenc"
)

// attributes is the one table of a message's CloudEvents attributes, in
// the order structured mode writes them. Everything that writes or reads
// an attribute is driven by it: the structured form (MarshalJSON,
// UnmarshalJSON), and each binding's headers in binary mode
// (Binding.BinaryHeaders, Binding.Decode). A new attribute is one line
// here, and a field of Message.
var attributes = []*Attribute{
	fixed("specversion", SpecVersion),
	text("id", func(m *Message) *string { return &m.ID }),
	text("source", func(m *Message) *string { return &m.Source }),
	text("type", func(m *Message) *string { return &m.Type }),
	text("subject", func(m *Message) *string { return &m.Subject }),
	{name: "time", kind: kindTime},
	fixed("datacontenttype", ContentType),
	text("resourceversion", func(m *Message) *string { return &m.ResourceVersion }),
	text("uid", func(m *Message) *string { return &m.UID }),
	text("kind", func(m *Message) *string { return &m.Kind }),
	text("apiversion", func(m *Message) *string { return &m.APIVersion }),
	optional(text("namespace", func(m *Message) *string { return &m.Namespace })),
	text("name", func(m *Message) *string { return &m.Name }),
	text("cluster", func(m *Message) *string { return &m.Cluster }),
	flag("snapshot", func(m *Message) *bool { return &m.Snapshot }),
	optional(flag("contentomitted", func(m *Message) *bool { return &m.ContentOmitted })),
	optional(text("reason", func(m *Message) *string { return &m.Reason })),
}

// byName finds an attribute by its name.
var byName = func() map[string]*Attribute {
	out := make(map[string]*Attribute, len(attributes))
	for _, a := range attributes {
		a.member = `"` + a.name + `":`
		out[a.name] = a
	}
	return out
}()

// Attribute is one CloudEvents attribute of a Message: its name, which is
// its member in structured mode and, after the binding's prefix, its
// header in binary mode (see Binding.Header), and how its value is
// written.
type Attribute struct {
	name string
	kind kind
	// optional attributes are left out while they are empty (or false).
	optional bool
	// fixed is the value of a kindFixed attribute, the same in every
	// message.
	fixed string
	str   func(*Message) *string
	flag  func(*Message) *bool
	// member is `"name":`.
	member string
}

// kind is how an attribute's value is written.
type kind uint8

const (
	kindString kind = iota
	kindBool
	kindTime
	kindFixed
)

func text(name string, field func(*Message) *string) *Attribute {
	return &Attribute{name: name, kind: kindString, str: field}
}

func flag(name string, field func(*Message) *bool) *Attribute {
	return &Attribute{name: name, kind: kindBool, flag: field}
}

func fixed(name, value string) *Attribute {
	return &Attribute{name: name, kind: kindFixed, fixed: value}
}

func optional(a *Attribute) *Attribute {
	a.optional = true
	return a
}

// Attributes lists every attribute a message may carry, in the order
// structured mode writes them.
func Attributes() []*Attribute { return append([]*Attribute(nil), attributes...) }

// AttributeNamed is the attribute of that name, nil when there is none.
func AttributeNamed(name string) *Attribute { return byName[name] }

// Name is the attribute's name, such as "resourceversion".
func (a *Attribute) Name() string { return a.name }

// Optional reports whether messages leave the attribute out while it is
// unset: "namespace" for cluster-scoped objects, "contentomitted" unless
// true, "reason" unless set. Every other attribute is in every message.
func (a *Attribute) Optional() bool { return a.optional }

// Value is the attribute's value in m as text, as a binary-mode header
// holds it before the binding escapes it (RFC 3339 in UTC with
// nanoseconds for the time, "true" or "false" for flags); ok is false
// when m leaves the attribute out.
func (a *Attribute) Value(m *Message) (v string, ok bool) {
	if !a.present(m) {
		return "", false
	}
	switch a.kind {
	case kindFixed:
		return a.fixed, true
	case kindTime:
		return m.Time.UTC().Format(time.RFC3339Nano), true
	case kindBool:
		return strconv.FormatBool(*a.flag(m)), true
	}
	return *a.str(m), true
}

// present reports whether m carries the attribute.
func (a *Attribute) present(m *Message) bool {
	if !a.optional {
		return true
	}
	switch a.kind {
	case kindBool:
		return *a.flag(m)
	case kindString:
		return *a.str(m) != ""
	}
	return true
}

// appendJSON appends the attribute's value in m as JSON.
func (a *Attribute) appendJSON(b []byte, m *Message) []byte {
	switch a.kind {
	case kindFixed:
		// The fixed values hold nothing a JSON string escapes.
		b = append(b, '"')
		b = append(b, a.fixed...)
		return append(b, '"')
	case kindTime:
		// Nor does RFC 3339.
		b = append(b, '"')
		b = m.Time.UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	case kindBool:
		return strconv.AppendBool(b, *a.flag(m))
	}
	return jsonenc.AppendString(b, *a.str(m))
}

// fromJSON is the text form of the attribute's JSON value.
func (a *Attribute) fromJSON(raw json.RawMessage) (string, error) {
	if a.kind == kindBool {
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
		return strconv.FormatBool(v), nil
	}
	// Most values hold nothing JSON escapes: read them as they are.
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && plain(raw[1:n-1]) {
		return string(raw[1 : n-1]), nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	return v, nil
}

// plain reports whether b, inside a JSON string's quotes, is its value as
// it is: printable ASCII without quotes or backslashes.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// String is the attribute's name.
func (a *Attribute) String() string { return a.name }

// check reports an attribute unknown to the table; Binding uses it to
// check its own lists at start.
func check(names ...string) {
	for _, n := range names {
		if byName[n] == nil {
			panic(fmt.Sprintf("wire: %q is not an attribute", n))
		}
	}
}
