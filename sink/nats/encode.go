package nats

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/wire"
)

// Headers the sink sets besides the attributes' (wire.NATS).
const (
	// MsgIDHeader carries the event id on every message. JetStream drops a
	// message whose id it has seen within the stream's duplicate window.
	MsgIDHeader = wire.NATSMsgIDHeader
	// ContentTypeHeader is set to wire.StructuredContentType in
	// structured mode, which is how the CloudEvents NATS binding tells the
	// modes apart.
	ContentTypeHeader = wire.NATSContentTypeHeader
)

// maxHeaderLen is the most header bytes a binary-mode message may have. A
// stream refuses a message whose headers pass 64 KiB (65,535 bytes); the
// rest is room for the headers the publish adds (Nats-Expected-Stream).
const maxHeaderLen = 65535 - 1024

// encode builds the NATS message for m: its subject from the template, the
// Nats-Msg-Id header, for a delete in the state layout the Nats-TTL
// header of BRIDGE_NATS_DELETE_TTL, and the event in the content mode of the
// configuration, its headers as wire.NATS writes them. In binary mode an
// event whose attributes would pass maxHeaderLen, which only an object
// name of more than about 30 KB can do, is sent in structured mode
// instead: the binding's receivers, and wire.NATS.Decode, tell the modes
// apart.
func (s *Sink) encode(m *wire.Message) (*nats.Msg, error) {
	subject, err := s.tmpl.Subject(m)
	if err != nil {
		return nil, err
	}
	size := 6
	if s.cfg.CEMode == CEBinary {
		size = 22
	}
	h := make(nats.Header, size)
	// The status line and the blank line that ends the headers.
	n := len("NATS/1.0\r\n") + len("\r\n")
	add := func(name, value string) {
		h[name] = []string{value}
		n += len(name) + len(value) + 4 // "k: v\r\n"
	}
	add(MsgIDHeader, m.ID)
	// In the state layout a delete replaces its object's state in the
	// stream, and expires after the delete TTL, so the stream does not
	// keep every object that ever lived.
	if m.Action == wire.ActionDeleted && s.deleteTTL != "" {
		add(jetstream.MsgTTLHeader, s.deleteTTL)
	}
	if m.View != "" && s.HoldsState() {
		add(wire.NATS.ViewHeader(), m.View)
	}
	if s.cfg.CEMode == CEBinary {
		wire.NATS.BinaryHeaders(m, add)
		if n <= maxHeaderLen {
			// The data, a part of the encoder's buffer: not copied.
			return &nats.Msg{Subject: subject, Header: h, Data: m.Data}, nil
		}
		for _, a := range wire.Attributes() {
			delete(h, wire.NATS.Header(a))
		}
	}
	// The event as the encoder wrote it, in one buffer: not copied.
	body, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	add(ContentTypeHeader, wire.NATS.StructuredContentType())
	if s.HoldsState() {
		// What the stream holds can be read with headers only (see
		// ReadState).
		wire.NATS.IdentityHeaders(m, add)
	}
	return &nats.Msg{Subject: subject, Header: h, Data: body}, nil
}
