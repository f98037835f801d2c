package nats

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/sink"
)

// actionDeleted is the Action of a delete.
const actionDeleted = "deleted"

// Headers the sink sets.
const (
	// MsgIDHeader carries the event id on every message. JetStream drops a
	// message whose id it has seen within the stream's duplicate window.
	MsgIDHeader = "Nats-Msg-Id"
	// ContentTypeHeader is set to StructuredContentType in structured
	// mode, which is how the CloudEvents NATS binding tells the modes
	// apart.
	ContentTypeHeader = "Content-Type"
	// StructuredContentType is the media type of a structured-mode body.
	StructuredContentType = "application/cloudevents+json"
	// HeaderPrefix starts the header of each attribute in binary mode.
	HeaderPrefix = "ce-"
)

// maxHeaderLen is the most header bytes a binary-mode message may have. A
// stream refuses a message whose headers pass 64 KiB (65,535 bytes); the
// rest is room for the headers the publish adds (Nats-Expected-Stream).
const maxHeaderLen = 65535 - 1024

// encode builds the NATS message for m: its subject from the template, the
// Nats-Msg-Id header, for a delete in the state layout the Nats-TTL
// header of BRIDGE_NATS_DELETE_TTL, and the event in the content mode of the
// configuration. In binary mode an event whose attributes would pass
// maxHeaderLen, which only an object name of more than about 30 KB can
// do, is sent in structured mode instead: the binding's receivers, and
// Decode, tell the modes apart by Content-Type.
func (s *Sink) encode(m *sink.Message) (*nats.Msg, error) {
	subject, err := s.tmpl.Subject(m)
	if err != nil {
		return nil, err
	}
	// In the state layout a delete replaces its object's state in the
	// stream, and expires after the delete TTL, so the stream does not
	// keep every object that ever lived.
	ttl := ""
	if m.Action == actionDeleted {
		ttl = s.deleteTTL
	}
	if s.cfg.CEMode == CEBinary {
		attrs := attributes(m)
		// Room for the TTL and the stream header the publish adds.
		h := make(nats.Header, len(attrs)+3)
		h[MsgIDHeader] = []string{m.ID}
		n := len("NATS/1.0\r\n") + len(MsgIDHeader) + len(m.ID) + 6
		if ttl != "" {
			h[jetstream.MsgTTLHeader] = []string{ttl}
			n += len(jetstream.MsgTTLHeader) + len(ttl) + 4
		}
		for _, a := range attrs {
			v := percentEncode(a.value)
			h[a.header] = []string{v}
			n += len(a.header) + len(v) + 4 // "k: v\r\n"
		}
		if m.View != "" && s.HoldsState() {
			h[ViewHeader] = []string{m.View}
			n += len(ViewHeader) + len(m.View) + 4
		}
		if n <= maxHeaderLen {
			// The data, a part of the encoder's buffer: not copied.
			return &nats.Msg{Subject: subject, Header: h, Data: m.Data}, nil
		}
	}
	// The event as the encoder wrote it, in one buffer: not copied.
	body, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	h := make(nats.Header, 6)
	h[MsgIDHeader] = []string{m.ID}
	h[ContentTypeHeader] = []string{StructuredContentType}
	if ttl != "" {
		h[jetstream.MsgTTLHeader] = []string{ttl}
	}
	if s.HoldsState() {
		// What the stream holds can be read with headers only (see
		// ReadState).
		h[uidHeader] = []string{percentEncode(m.UID)}
		h[resourceVersionHeader] = []string{percentEncode(m.ResourceVersion)}
		if m.View != "" {
			h[ViewHeader] = []string{m.View}
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: body}, nil
}

// attribute is an event attribute and its binary-mode header, HeaderPrefix
// and the attribute's name.
type attribute struct{ header, value string }

// attributes lists the event's attributes as binary mode sends them, in
// the order of docs/message-format.md. namespace is left out for
// cluster-scoped objects, contentomitted unless true, and reason unless
// set, as in structured mode.
func attributes(m *sink.Message) []attribute {
	attrs := make([]attribute, 0, 16)
	attrs = append(attrs,
		attribute{HeaderPrefix + "specversion", sink.SpecVersion},
		attribute{HeaderPrefix + "id", m.ID},
		attribute{HeaderPrefix + "source", m.Source},
		attribute{HeaderPrefix + "type", m.Type},
		attribute{HeaderPrefix + "subject", m.Subject},
		attribute{HeaderPrefix + "time", m.Time.UTC().Format(time.RFC3339Nano)},
		attribute{HeaderPrefix + "datacontenttype", sink.ContentType},
		attribute{HeaderPrefix + "resourceversion", m.ResourceVersion},
		attribute{HeaderPrefix + "uid", m.UID},
		attribute{HeaderPrefix + "kind", m.Kind},
		attribute{HeaderPrefix + "apiversion", m.APIVersion},
	)
	if m.Namespace != "" {
		attrs = append(attrs, attribute{HeaderPrefix + "namespace", m.Namespace})
	}
	attrs = append(attrs,
		attribute{HeaderPrefix + "name", m.Name},
		attribute{HeaderPrefix + "cluster", m.Cluster},
		attribute{HeaderPrefix + "snapshot", strconv.FormatBool(m.Snapshot)},
	)
	if m.ContentOmitted {
		attrs = append(attrs, attribute{HeaderPrefix + "contentomitted", "true"})
	}
	if m.Reason != "" {
		attrs = append(attrs, attribute{HeaderPrefix + "reason", m.Reason})
	}
	return attrs
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
