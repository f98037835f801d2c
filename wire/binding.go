package wire

import (
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
// NATS and Kafka are the two bindings; a Binding is immutable.
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
// every byte outside printable ASCII as %XX); structured mode is told by
// Content-Type application/cloudevents+json, and a message without a
// ce-id header is read as structured. In the state layout a structured
// message also carries ce-uid and ce-resourceversion, and "Bridge-View".
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
	escape:         func(s string) string { return s },
	unescape:       func(s string) (string, error) { return s, nil },
	identity:       []string{"id", "type", "resourceversion", "uid", "contentomitted", "reason"},
	tombstone:      []string{"cluster", "source", "uid"},
	view:           "bridge_view",
}

func init() {
	for _, b := range []*Binding{NATS, Kafka} {
		check(b.identity...)
		check(b.tombstone...)
	}
}

// String names the bus.
func (b *Binding) String() string { return b.bus }

// Header is the name of attribute a's header: the binding's prefix and
// the attribute's name, or, on Kafka, "content-type" for datacontenttype.
func (b *Binding) Header(a *Attribute) string {
	if a.name == "datacontenttype" && b.contentType != "" {
		return b.contentType
	}
	return b.prefix + a.name
}

// HeaderOf is the header of the attribute named name, as Header; "" when
// there is no such attribute.
func (b *Binding) HeaderOf(name string) string {
	a := byName[name]
	if a == nil {
		return ""
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
// the binding asks. The data, m.Data, is the body.
func (b *Binding) BinaryHeaders(m *Message, add func(name, value string)) {
	for _, a := range attributes {
		if v, ok := a.Value(m); ok {
			add(b.Header(a), b.escape(v))
		}
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

func (b *Binding) some(m *Message, names []string, add func(name, value string)) {
	for _, n := range names {
		a := byName[n]
		if v, ok := a.Value(m); ok {
			add(b.Header(a), b.escape(v))
		}
	}
}

// HeaderValue is the value of the attribute named name in headers (the
// binding's header, unescaped), and whether headers have it. It reads
// identity and tombstone headers without decoding a message.
func (b *Binding) HeaderValue(headers iter.Seq2[string, string], name string) (string, bool, error) {
	a := byName[name]
	if a == nil {
		return "", false, fmt.Errorf("wire: %q is not an attribute", name)
	}
	want := b.Header(a)
	for k, v := range headers {
		if k == want || b.foldCase && strings.EqualFold(k, want) {
			u, err := b.unescape(v)
			if err != nil {
				return "", true, fmt.Errorf("wire: %s header %s: %w", b.bus, k, err)
			}
			return u, true, nil
		}
	}
	return "", false, nil
}

// Decode reads back a message the bridge wrote on the binding's bus, in
// either mode, from its body and headers (names and first values, in any
// order). On NATS a message without a ce-id header is structured; on
// Kafka a content-type of application/cloudevents+json is, and a binary
// record must carry ce_specversion. Headers that are not attributes are
// ignored. A Kafka tombstone (a nil body) decodes to nil and no error.
func (b *Binding) Decode(body []byte, headers iter.Seq2[string, string]) (*Message, error) {
	if body == nil && b.tombstone != nil {
		return nil, nil
	}
	var (
		d           decoder
		contentType string
		hasID       bool
		attrs       [][2]string
	)
	for k, v := range headers {
		if b.contentType != "" && strings.EqualFold(k, b.contentType) {
			contentType = v
			continue
		}
		name, ok := cutPrefix(k, b.prefix, b.foldCase)
		if !ok {
			continue
		}
		if b.foldCase {
			name = strings.ToLower(name)
		}
		if name == "id" {
			hasID = true
		}
		attrs = append(attrs, [2]string{name, v})
	}
	structured := strings.HasPrefix(contentType, StructuredContentType)
	if b.contentType == "" {
		structured = !hasID
	}
	if structured {
		m := &Message{}
		if err := m.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("wire: %s: %w", b.bus, err)
		}
		return m, nil
	}
	if b.contentType != "" {
		if !hasAttr(attrs, "specversion") {
			return nil, fmt.Errorf("wire: %s: not a CloudEvent: content-type %q and no %sspecversion header", b.bus, contentType, b.prefix)
		}
	}
	for _, kv := range attrs {
		a := byName[kv[0]]
		if a == nil {
			continue
		}
		v, err := b.unescape(kv[1])
		if err != nil {
			return nil, fmt.Errorf("wire: %s: header %s%s: %w", b.bus, b.prefix, kv[0], err)
		}
		if err := d.set(a, v); err != nil {
			return nil, fmt.Errorf("wire: %s: decode event: %w", b.bus, err)
		}
	}
	d.msg.Data = body
	if len(body) == 0 {
		d.msg.Data = nil
	}
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("wire: %s: %w", b.bus, err)
	}
	m := d.msg
	return &m, nil
}

func hasAttr(attrs [][2]string, name string) bool {
	for _, kv := range attrs {
		if kv[0] == name {
			return true
		}
	}
	return false
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
