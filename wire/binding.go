package wire

import (
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Binding is how one bus carries a message, after the CloudEvents
// protocol binding of that bus: in structured mode the whole event is the
// body (MarshalJSON) and a content type header says so; in binary mode
// the data is the body and each attribute of the table (Attributes) is a
// header of its own, named by Header. The bridge's sinks write headers
// through a Binding and its consumers read messages back through the same
// one, so a bus's headers have one definition.
//
// NATS and Kafka are the two bindings; a Binding is immutable, and the
// zero Binding is not one: use NATS or Kafka.
type Binding struct {
	bus string
	// prefix starts each attribute's header in binary mode.
	prefix string
	// contentType is the header of datacontenttype in binary mode and
	// of the structured media type in structured mode; "" for NATS,
	// where binary mode writes datacontenttype as prefix+name and the
	// structured media type goes in natsContentTypeHeader.
	contentType string
	// structuredType is the content type header's value in structured
	// mode.
	structuredType string
	// escape and unescape encode header values (NATS: percent-encoding).
	escape   func(string) string
	unescape func(string) (string, error)
	// foldCase reads header names in any case.
	foldCase bool
	// identity are the attributes a structured-mode message also carries
	// as headers, where the sink adds them, so that what the bus holds
	// can be read with headers only.
	identity []string
	// tombstone are the attributes of a deleted object's event that its
	// tombstone carries as headers (Kafka's compacted topics).
	tombstone []string
	// view is the header of Message.View.
	view string
	// headers are the attributes' headers, by their place in the table.
	headers []string
}

// NATS headers that are not attributes.
const (
	// NATSMsgIDHeader carries the event id on every message. JetStream
	// drops a message whose id it has seen within the stream's duplicate
	// window.
	NATSMsgIDHeader = "Nats-Msg-Id"
	// NATSContentTypeHeader is StructuredContentType in structured mode,
	// which is how the CloudEvents NATS binding tells the modes apart.
	NATSContentTypeHeader = "Content-Type"
)

// KafkaStructuredContentType is the content-type header of a
// structured-mode record.
const KafkaStructuredContentType = StructuredContentType + "; charset=UTF-8"

// NATS is the CloudEvents NATS binding as the bridge writes it: binary
// headers "ce-<attribute>", values percent-encoded (space, '"', '%' and
// every byte outside printable ASCII as %XX); a structured message
// carries Content-Type application/cloudevents+json for the binding's
// receivers, and Decode reads a message without a ce-id header as
// structured. In the state layout a structured message also carries
// ce-uid and ce-resourceversion, and "Bridge-View".
var NATS = &Binding{
	bus:            "nats",
	prefix:         "ce-",
	structuredType: StructuredContentType,
	escape:         percentEncode,
	unescape:       percentDecode,
	foldCase:       true,
	identity:       []string{"uid", "resourceversion"},
	view:           "Bridge-View",
}

// Kafka is the CloudEvents Kafka binding as the bridge writes it: binary
// headers "ce_<attribute>" with datacontenttype as "content-type", values
// as they are; structured mode is told by a content-type of
// application/cloudevents+json. In both modes a record carries ce_id,
// ce_type, ce_resourceversion, ce_uid, and ce_contentomitted and
// ce_reason when set, so consumers filter without decoding the value; a
// tombstone carries ce_cluster, ce_source and ce_uid; in the state layout
// "bridge_view" carries the view.
var Kafka = &Binding{
	bus:            "kafka",
	prefix:         "ce_",
	contentType:    "content-type",
	structuredType: KafkaStructuredContentType,
	// Header values are bytes; the attributes are text.
	unescape:  func(s string) (string, error) { return strings.ToValidUTF8(s, "\uFFFD"), nil },
	identity:  []string{"id", "type", "resourceversion", "uid", "contentomitted", "reason"},
	tombstone: []string{"cluster", "source", "uid"},
	view:      "bridge_view",
}

func init() {
	for _, b := range []*Binding{NATS, Kafka} {
		check(b.identity...)
		check(b.tombstone...)
		b.headers = make([]string, len(attributes))
		for _, a := range attributes {
			b.headers[a.index] = b.header(a)
		}
	}
}

// String names the bus.
func (b *Binding) String() string { return b.bus }

// Header is the name of attribute a's header: the binding's prefix and
// the attribute's name, or, on Kafka, "content-type" for datacontenttype.
func (b *Binding) Header(a *Attribute) string { return b.headers[a.index] }

func (b *Binding) header(a *Attribute) string {
	if a.name == "datacontenttype" && b.contentType != "" {
		return b.contentType
	}
	return b.prefix + a.name
}

// HeaderOf is the header of the attribute named name, as Header. It
// panics when there is no such attribute: the name is the caller's
// constant.
func (b *Binding) HeaderOf(name string) string {
	a := byName[name]
	if a == nil {
		panic(fmt.Sprintf("wire: %q is not an attribute", name))
	}
	return b.Header(a)
}

// ContentTypeHeader is the header that tells a structured-mode message.
func (b *Binding) ContentTypeHeader() string {
	if b.contentType != "" {
		return b.contentType
	}
	return NATSContentTypeHeader
}

// StructuredContentType is the value of ContentTypeHeader in structured
// mode.
func (b *Binding) StructuredContentType() string { return b.structuredType }

// ViewHeader is the header that carries Message.View in a state layout.
func (b *Binding) ViewHeader() string { return b.view }

// BinaryHeaders calls add with each header of m in binary mode: one per
// attribute m carries, in the order of Attributes, the value escaped as
// the binding asks; on Kafka, content-type comes last. The data, m.Data,
// is the body.
func (b *Binding) BinaryHeaders(m *Message, add func(name, value string)) {
	var last *Attribute
	for _, a := range attributes {
		if a.name == "datacontenttype" && b.contentType != "" {
			last = a
			continue
		}
		if v, ok := a.Value(m); ok {
			add(b.headers[a.index], b.esc(v))
		}
	}
	if last != nil {
		add(b.headers[last.index], last.fixed)
	}
}

// IdentityHeaders calls add with the headers a structured-mode message
// carries besides its content type, where the sink adds them: those of
// the binding's identity attributes that m carries.
func (b *Binding) IdentityHeaders(m *Message, add func(name, value string)) {
	b.some(m, b.identity, add)
}

// TombstoneHeaders calls add with the headers of the tombstone that
// follows m, a deleted object's event, on a compacted topic: its
// cluster, source and uid, so that a consumer of a topic several
// clusters write to applies it to the cluster it names. None on NATS.
func (b *Binding) TombstoneHeaders(m *Message, add func(name, value string)) {
	b.some(m, b.tombstone, add)
}

// esc escapes v as the binding asks.
func (b *Binding) esc(v string) string {
	if b.escape == nil {
		return v
	}
	return b.escape(v)
}

func (b *Binding) some(m *Message, names []string, add func(name, value string)) {
	for _, n := range names {
		a := byName[n]
		if v, ok := a.Value(m); ok {
			add(b.headers[a.index], b.esc(v))
		}
	}
}

// HeaderValue is the value of the attribute named name in headers (the
// binding's header, unescaped; the last one, when there are several), and
// whether headers have it. It reads identity and tombstone headers
// without decoding a message.
func (b *Binding) HeaderValue(headers iter.Seq2[string, string], name string) (string, bool, error) {
	a := byName[name]
	if a == nil {
		return "", false, fmt.Errorf("wire: %q is not an attribute", name)
	}
	want := b.headers[a.index]
	var v string
	found := false
	for k, hv := range headers {
		if k == want || b.foldCase && strings.EqualFold(k, want) {
			v, found = hv, true
		}
	}
	if !found {
		return "", false, nil
	}
	u, err := b.unescape(v)
	if err != nil {
		return "", true, fmt.Errorf("wire: %s header %s: %w", b.bus, want, err)
	}
	return u, true, nil
}

// Decode reads back a message the bridge wrote on the binding's bus, in
// either mode, from its body and headers (names and values, in any
// order; where a header comes twice, the last one counts). On NATS a
// message without a ce-id header is structured, and attribute headers
// are read in any case; on Kafka a content-type of
// application/cloudevents+json is, and a binary record must carry
// ce_specversion. In binary mode the body must be JSON, and is the data
// as it is (an empty NATS body is null). Headers that are not attributes
// are ignored. A Kafka tombstone (a nil value) decodes to nil and no
// error.
func (b *Binding) Decode(body []byte, headers iter.Seq2[string, string]) (*Message, error) {
	if body == nil && b.tombstone != nil {
		return nil, nil
	}
	var (
		contentType string
		hasID       bool
		values      = make([]string, len(attributes))
		present     = make([]bool, len(attributes))
	)
	for k, v := range headers {
		if b.contentType != "" && k == b.contentType {
			contentType = v
			continue
		}
		if k == b.prefix+"id" && v != "" {
			hasID = true
		}
		name, ok := cutPrefix(k, b.prefix, b.foldCase)
		if !ok {
			continue
		}
		// Names are read as encoding/json reads members: in any case.
		a := byName[strings.ToLower(name)]
		if a == nil {
			continue
		}
		values[a.index], present[a.index] = v, true
	}
	structured := strings.HasPrefix(contentType, StructuredContentType)
	if b.contentType == "" {
		structured = !hasID
	}
	if structured {
		m := &Message{}
		if err := m.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("%s: %w", b.bus, err)
		}
		return m, nil
	}
	if b.contentType != "" && !present[byName["specversion"].index] {
		return nil, fmt.Errorf("wire: %s: not a CloudEvent: content-type %q and no %sspecversion header", b.bus, contentType, b.prefix)
	}
	var d decoder
	for _, a := range attributes {
		if !present[a.index] {
			// Left out: an optional attribute, or one whose absence
			// the checks below report (specversion, time).
			if a.kind == kindTime {
				return nil, fmt.Errorf("wire: %s: decode event: no %s header", b.bus, b.headers[a.index])
			}
			continue
		}
		v, err := b.unescape(values[a.index])
		if err != nil {
			return nil, fmt.Errorf("wire: %s: header %s: %w", b.bus, b.headers[a.index], err)
		}
		if err := d.set(a, v); err != nil {
			return nil, fmt.Errorf("wire: %s: header %s: %w", b.bus, b.headers[a.index], err)
		}
	}
	switch {
	case len(body) == 0 && b.tombstone == nil:
		d.msg.Data = json.RawMessage("null")
	case !json.Valid(body):
		return nil, fmt.Errorf("wire: %s: decode event %q: the body is not JSON", b.bus, d.msg.ID)
	default:
		d.msg.Data = body
	}
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("%s: %w", b.bus, err)
	}
	m := d.msg
	return &m, nil
}

func cutPrefix(s, prefix string, fold bool) (string, bool) {
	if len(s) < len(prefix) {
		return s, false
	}
	if fold && strings.EqualFold(s[:len(prefix)], prefix) || s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

// Headers adapts headers that may hold several values per name (NATS's)
// to what Decode reads: each name with its first value.
func Headers[H ~map[string][]string](h H) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for k, vs := range h {
			if len(vs) == 0 {
				continue
			}
			if !yield(k, vs[0]) {
				return
			}
		}
	}
}

// percentEncode encodes a header value as the CloudEvents NATS binding
// asks: space, '"', '%' and every byte outside printable ASCII become %XX.
func percentEncode(v string) string {
	n := 0
	for i := 0; i < len(v); i++ {
		if pctEscaped(v[i]) {
			n++
		}
	}
	if n == 0 {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) + 2*n)
	for i := 0; i < len(v); i++ {
		if c := v[i]; pctEscaped(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xF])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func pctEscaped(c byte) bool { return c <= ' ' || c >= 0x7f || c == '"' || c == '%' }

// percentDecode reverses percentEncode; it accepts lower-case digits and
// needlessly encoded bytes, as the binding asks of receivers.
func percentDecode(v string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", fmt.Errorf("%q: truncated escape", v)
		}
		n, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%q: bad escape %q", v, v[i:i+3])
		}
		b.WriteByte(byte(n))
		i += 2
	}
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("%q: not UTF-8 once decoded", v)
	}
	return b.String(), nil
}
