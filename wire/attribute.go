package wire

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unsafe"

	"github.com/kubebus/bridge/internal/jsonenc"
)

// attributes is the one table of a message's CloudEvents attributes, in
// the order structured mode writes them: each attribute's name and the
// field of Message that holds its value. Everything that writes or reads
// an attribute is driven by it: the structured form (MarshalJSON,
// UnmarshalJSON), and each binding's headers in binary mode
// (Binding.BinaryHeaders, Binding.Decode). A new attribute is one line
// here, and a field of Message.
var attributes = table(
	fixed("specversion", SpecVersion),
	text("id", "ID"),
	text("source", "Source"),
	text("type", "Type"),
	text("subject", "Subject"),
	&Attribute{name: "time", kind: kindTime},
	fixed("datacontenttype", ContentType),
	text("resourceversion", "ResourceVersion"),
	text("uid", "UID"),
	text("kind", "Kind"),
	text("apiversion", "APIVersion"),
	optional(text("namespace", "Namespace")),
	text("name", "Name"),
	text("cluster", "Cluster"),
	flag("snapshot", "Snapshot"),
	optional(flag("contentomitted", "ContentOmitted")),
	optional(text("reason", "Reason")),
)

// byName finds an attribute by its name.
var byName = func() map[string]*Attribute {
	out := make(map[string]*Attribute, len(attributes))
	for _, a := range attributes {
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
	// field names the field of Message that holds a kindString or
	// kindBool value, at offset off.
	field string
	off   uintptr
	// index is the attribute's place in the table.
	index int
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

func text(name, field string) *Attribute {
	return &Attribute{name: name, kind: kindString, field: field}
}

func flag(name, field string) *Attribute {
	return &Attribute{name: name, kind: kindBool, field: field}
}

func fixed(name, value string) *Attribute {
	return &Attribute{name: name, kind: kindFixed, fixed: value}
}

func optional(a *Attribute) *Attribute {
	a.optional = true
	return a
}

// table completes the attributes: their place, their member, and the
// offset of their field, which must be a string for kindString and a
// bool for kindBool. A field that is missing or of another type is a
// mistake in the table, found when the package is first loaded.
func table(attrs ...*Attribute) []*Attribute {
	msg := reflect.TypeFor[Message]()
	for i, a := range attrs {
		a.index = i
		a.member = `"` + a.name + `":`
		if a.field == "" {
			continue
		}
		f, ok := msg.FieldByName(a.field)
		want := reflect.String
		if a.kind == kindBool {
			want = reflect.Bool
		}
		if !ok || f.Type.Kind() != want {
			panic(fmt.Sprintf("wire: attribute %s: Message has no %s field %s", a.name, want, a.field))
		}
		a.off = f.Offset
	}
	return attrs
}

// str is the string field of a kindString attribute in m. The offset was
// checked against Message's type when the table was made.
func (a *Attribute) str(m *Message) *string {
	return (*string)(unsafe.Add(unsafe.Pointer(m), a.off))
}

// flag is the bool field of a kindBool attribute in m.
func (a *Attribute) flag(m *Message) *bool {
	return (*bool)(unsafe.Add(unsafe.Pointer(m), a.off))
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
