package kafka

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/sink"
)

// Record headers. In both modes every event carries HeaderContentType,
// HeaderID, HeaderType, HeaderResourceVersion and HeaderUID, so consumers
// (and the bridge, reading back what a topic holds) can filter and
// deduplicate without decoding the value, and an event that carries
// only its object's identity (sink.Message.ContentOmitted) carries
// HeaderContentOmitted, and a delete of an object that still exists
// (sink.Message.Reason, such as "left-filter") HeaderReason. Binary mode
// adds the other attributes as "ce_<attribute>" headers, as the
// CloudEvents Kafka binding says.
//
// A tombstone carries HeaderCluster, HeaderSource and HeaderUID, the
// values of the deleted event it follows, and no other header: its key
// names the object within its topic, but not its cluster, and bridges of
// several clusters may write to one topic. Without HeaderContentType or
// ce_specversion it is never taken for an event.
const (
	HeaderContentType     = "content-type"
	HeaderID              = "ce_id"
	HeaderType            = "ce_type"
	HeaderResourceVersion = "ce_resourceversion"
	HeaderContentOmitted  = "ce_contentomitted"
	HeaderReason          = "ce_reason"
	HeaderCluster         = "ce_cluster"
	HeaderSource          = "ce_source"
	HeaderUID             = "ce_uid"

	headerPrefix = "ce_"
)

// ContentTypeStructured is the content-type of a structured-mode event.
const ContentTypeStructured = "application/cloudevents+json; charset=UTF-8"

// contentTypeStructured is ContentTypeStructured as a header value, shared
// by every record: kafka-go only reads header values.
var contentTypeStructured = []byte(ContentTypeStructured)

// actionDeleted is the Action of a message about a deleted object.
const actionDeleted = "deleted"

// HeaderView carries, in the state layout, the object's state in the
// bridge's view (sink.Message.View), when it has one: not an event
// attribute, but what the bridge reads back of each object (ReadState).
const HeaderView = "bridge_view"

// encode builds the record of m's event.
func (s *Sink) encode(m *sink.Message, topic string, key []byte) (kafkago.Message, error) {
	rec, err := s.encodeEvent(m, topic, key)
	if err == nil && m.View != "" && s.HoldsState() {
		rec.Headers = append(rec.Headers, kafkago.Header{Key: HeaderView, Value: []byte(m.View)})
	}
	return rec, err
}

// encodeEvent builds the record of m's event in the configured mode.
func (s *Sink) encodeEvent(m *sink.Message, topic string, key []byte) (kafkago.Message, error) {
	rec := kafkago.Message{Topic: topic, Key: key}
	// The value is the data, or the whole event, as the encoder wrote it
	// in one buffer: not copied.
	if s.cfg.CEMode == ModeBinary {
		rec.Value = m.Data
		rec.Headers = binaryHeaders(m)
		return rec, nil
	}
	value, err := m.MarshalJSON()
	if err != nil {
		return rec, err
	}
	rec.Value = value
	rec.Headers = []kafkago.Header{
		{Key: HeaderContentType, Value: contentTypeStructured},
		{Key: HeaderID, Value: []byte(m.ID)},
		{Key: HeaderType, Value: []byte(m.Type)},
		{Key: HeaderResourceVersion, Value: []byte(m.ResourceVersion)},
		{Key: HeaderUID, Value: []byte(m.UID)},
	}
	if m.ContentOmitted {
		rec.Headers = append(rec.Headers, kafkago.Header{Key: HeaderContentOmitted, Value: []byte("true")})
	}
	if m.Reason != "" {
		rec.Headers = append(rec.Headers, kafkago.Header{Key: HeaderReason, Value: []byte(m.Reason)})
	}
	return rec, nil
}

// binaryHeaders are m's attributes as CloudEvents Kafka binding headers:
// "ce_" and the attribute's name, with datacontenttype as content-type.
// An empty namespace is left out, as in structured mode.
func binaryHeaders(m *sink.Message) []kafkago.Header {
	h := make([]kafkago.Header, 0, 16)
	add := func(name, value string) {
		h = append(h, kafkago.Header{Key: name, Value: []byte(value)})
	}
	add(headerPrefix+"specversion", sink.SpecVersion)
	add(headerPrefix+"id", m.ID)
	add(HeaderSource, m.Source)
	add(headerPrefix+"type", m.Type)
	add(headerPrefix+"subject", m.Subject)
	add(headerPrefix+"time", m.Time.UTC().Format(time.RFC3339Nano))
	add(headerPrefix+"resourceversion", m.ResourceVersion)
	add(HeaderUID, m.UID)
	add(headerPrefix+"kind", m.Kind)
	add(headerPrefix+"apiversion", m.APIVersion)
	if m.Namespace != "" {
		add(headerPrefix+"namespace", m.Namespace)
	}
	add(headerPrefix+"name", m.Name)
	add(HeaderCluster, m.Cluster)
	add(headerPrefix+"snapshot", strconv.FormatBool(m.Snapshot))
	if m.ContentOmitted {
		add(HeaderContentOmitted, "true")
	}
	if m.Reason != "" {
		add(HeaderReason, m.Reason)
	}
	return append(h, kafkago.Header{Key: HeaderContentType, Value: []byte(sink.ContentType)})
}

// tombstone is the record that tells a compacted topic to forget key,
// after the deleted event m. Its headers name m's cluster, source and uid,
// so that a consumer of a topic several clusters write to applies it only
// to the cluster it names. The key already names the namespace and the
// name, which are left out: a tombstone is written even for an object
// whose name makes its event too large to publish, and must not become
// too large itself.
func tombstone(topic string, key []byte, m *sink.Message) kafkago.Message {
	return kafkago.Message{Topic: topic, Key: key, Headers: []kafkago.Header{
		{Key: HeaderCluster, Value: []byte(m.Cluster)},
		{Key: HeaderSource, Value: []byte(m.Source)},
		{Key: HeaderUID, Value: []byte(m.UID)},
	}}
}

// recordSize is the size kafka-go gives a record when it checks it against
// its batch limit (Writer.BatchBytes): the key, the value and the headers
// with their length prefixes, and 22 bytes of fixed overhead. Records up to
// the limit are accepted by WriteMessages; a larger one would fail the
// whole call, so the sink checks first.
func recordSize(rec *kafkago.Message) int {
	n := 4 + 1 + 1 + 8 + 4 + len(rec.Key) + 4 + len(rec.Value)
	n += varintLen(len(rec.Headers))
	for _, h := range rec.Headers {
		n += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return n
}

// varintLen is the length of n as a zig-zag varint.
func varintLen(n int) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], int64(n))
}

// errTooLarge is the error of a record over the producer limit.
func errTooLarge(size, limit int) error {
	return sink.TooLarge(fmt.Errorf("kafka sink: record of %d bytes is larger than BRIDGE_KAFKA_MAX_MESSAGE_BYTES (%d): %w",
		size, limit, kafkago.MessageSizeTooLarge))
}
