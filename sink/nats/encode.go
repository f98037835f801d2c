package nats

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kubebus/bridge/sink"
)

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

// encode builds the NATS message for m: its subject from the template, the
// Nats-Msg-Id header, and the event in the content mode of the
// configuration.
func (s *Sink) encode(m *sink.Message) (*nats.Msg, error) {
	subject, err := s.tmpl.Subject(m)
	if err != nil {
		return nil, err
	}
	nm := &nats.Msg{Subject: subject, Header: nats.Header{}}
	nm.Header.Set(MsgIDHeader, m.ID)
	if s.cfg.CEMode == CEBinary {
		for _, a := range attributes(m) {
			nm.Header.Set(HeaderPrefix+a.name, percentEncode(a.value))
		}
		nm.Data = m.Data
		return nm, nil
	}
	body, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	nm.Header.Set(ContentTypeHeader, StructuredContentType)
	nm.Data = body
	return nm, nil
}

type attribute struct{ name, value string }

// attributes lists the event's attributes as binary mode sends them, in
// the order of docs/message-format.md. namespace is left out for
// cluster-scoped objects, as in structured mode.
func attributes(m *sink.Message) []attribute {
	attrs := []attribute{
		{"specversion", sink.SpecVersion},
		{"id", m.ID},
		{"source", m.Source},
		{"type", m.Type},
		{"subject", m.Subject},
		{"time", m.Time.UTC().Format(time.RFC3339Nano)},
		{"datacontenttype", sink.ContentType},
		{"resourceversion", m.ResourceVersion},
		{"uid", m.UID},
		{"kind", m.Kind},
		{"apiversion", m.APIVersion},
	}
	if m.Namespace != "" {
		attrs = append(attrs, attribute{"namespace", m.Namespace})
	}
	return append(attrs,
		attribute{"name", m.Name},
		attribute{"cluster", m.Cluster},
		attribute{"snapshot", strconv.FormatBool(m.Snapshot)},
	)
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
