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
// rest is room for Nats-Expected-Stream, which encode sets in JetStream
// mode and does not count.
const maxHeaderLen = 65535 - 1024

// attributeCount is the number of attributes, the most headers binary
// mode writes for an event.
var attributeCount = len(wire.Attributes())

// headers are the headers of one message. The values share one backing
// array, each a slice of one value whose capacity ends at it, so that a
// message costs one allocation for all its values, and appending to one
// header's values, as nats.Header.Add does, copies them instead of
// overwriting the next header's.
type headers struct {
	h    nats.Header
	vals []string
	// n is the size of the header block on the wire: the status line,
	// a line per header and the blank line that ends them.
	n int
}

// newHeaders makes room for size headers: the map holds them without
// growing, and the values' backing array too.
func newHeaders(size int) headers {
	return headers{
		h:    make(nats.Header, size),
		vals: make([]string, 0, size),
		n:    len("NATS/1.0\r\n") + len("\r\n"),
	}
}

// set sets the header name to value, and counts it in n.
func (hs *headers) set(name, value string) {
	hs.setUncounted(name, value)
	hs.n += len(name) + len(value) + 4 // "k: v\r\n"
}

// setUncounted sets the header name to value without counting it in n.
func (hs *headers) setUncounted(name, value string) {
	i := len(hs.vals)
	hs.vals = append(hs.vals, value)
	hs.h[name] = hs.vals[i : i+1 : i+1]
}

// encode builds the NATS message for m: its subject from the template, the
// Nats-Msg-Id header, in JetStream mode the Nats-Expected-Stream header
// of the stream, for a delete in the state layout the Nats-TTL header of
// BRIDGE_NATS_DELETE_TTL, and the event in the content mode of the
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
	binary := s.cfg.CEMode == CEBinary
	// The number of headers m gets at most, so that neither the map nor
	// the values' backing array grows: exact in structured mode, every
	// attribute in binary mode. (Only the rare binary event sent
	// structured after all may grow the backing array.)
	size := 1 // Nats-Msg-Id
	deleteTTL := m.Action == wire.ActionDeleted && s.deleteTTL != ""
	if deleteTTL {
		size++
	}
	view := m.View != "" && s.HoldsState()
	if view {
		size++
	}
	if s.expectStream != "" {
		size++
	}
	switch {
	case binary:
		size += attributeCount
	case s.HoldsState():
		size += 1 + 2 // Content-Type, ce-uid and ce-resourceversion
	default:
		size++ // Content-Type
	}
	hs := newHeaders(size)
	hs.set(MsgIDHeader, m.ID)
	// In the state layout a delete replaces its object's state in the
	// stream, and expires after the delete TTL, so the stream does not
	// keep every object that ever lived.
	if deleteTTL {
		hs.set(jetstream.MsgTTLHeader, s.deleteTTL)
	}
	if view {
		hs.set(wire.NATS.ViewHeader(), m.View)
	}
	if s.expectStream != "" {
		// Only the sink's stream stores the message; another stream
		// that captures the subject refuses it. Set here rather than by
		// jetstream.WithExpectStream, which does it on every publish
		// at a cost of its own; not counted, as the option's was not.
		hs.setUncounted(jetstream.ExpectedStreamHeader, s.expectStream)
	}
	if binary {
		wire.NATS.BinaryHeaders(m, hs.set)
		if hs.n <= maxHeaderLen {
			// The data, a part of the encoder's buffer: not copied.
			return &nats.Msg{Subject: subject, Header: hs.h, Data: m.Data}, nil
		}
		for _, a := range wire.Attributes() {
			delete(hs.h, wire.NATS.Header(a))
		}
	}
	// The event as the encoder wrote it, in one buffer: not copied.
	body, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	hs.set(ContentTypeHeader, wire.NATS.StructuredContentType())
	if s.HoldsState() {
		// What the stream holds can be read with headers only (see
		// ReadState).
		wire.NATS.IdentityHeaders(m, hs.set)
	}
	return &nats.Msg{Subject: subject, Header: hs.h, Data: body}, nil
}
