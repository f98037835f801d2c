package kafka

import (
	"encoding/binary"
	"fmt"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

// The headers of the records the sink writes are wire.Kafka's: in both
// modes every event carries content-type, ce_id, ce_type,
// ce_resourceversion and ce_uid, so consumers (and the bridge, reading
// back what a topic holds) can filter and deduplicate without decoding
// the value, and ce_contentomitted and ce_reason when set; binary mode
// adds the other attributes as "ce_<attribute>" headers, as the
// CloudEvents Kafka binding says. A tombstone carries ce_cluster,
// ce_source and ce_uid, the values of the deleted event it follows, and
// no other header: its key names the object within its topic, but not
// its cluster, and bridges of several clusters may write to one topic.
// Without content-type or ce_specversion it is never taken for an event.
//
// HeaderView carries, in the state layout, the object's state in the
// bridge's view (wire.Message.View), when it has one: not an event
// attribute, but what the bridge reads back of each object (ReadState).
var HeaderView = wire.Kafka.ViewHeader()

// encode builds the record of m's event.
func (s *Sink) encode(m *wire.Message, topic string, key []byte) (kafkago.Message, error) {
	size := 8
	if s.cfg.CEMode == ModeBinary {
		size = 18
	}
	rec := kafkago.Message{Topic: topic, Key: key, Headers: make([]kafkago.Header, 0, size)}
	// The header values are copied into one buffer, and sliced once every
	// one is in: one allocation for all of them.
	var (
		vals  = make([]byte, 0, 256)
		spans [24]struct{ header, end int }
		n     int
	)
	add := func(name, value string) {
		if n == len(spans) {
			rec.Headers = append(rec.Headers, kafkago.Header{Key: name, Value: []byte(value)})
			return
		}
		rec.Headers = append(rec.Headers, kafkago.Header{Key: name})
		vals = append(vals, value...)
		spans[n].header, spans[n].end = len(rec.Headers)-1, len(vals)
		n++
	}

	// The value is the data, or the whole event, as the encoder wrote it
	// in one buffer: not copied.
	if s.cfg.CEMode == ModeBinary {
		rec.Value = m.Data
		wire.Kafka.BinaryHeaders(m, add)
	} else {
		value, err := m.MarshalJSON()
		if err != nil {
			return rec, err
		}
		rec.Value = value
		rec.Headers = append(rec.Headers, kafkago.Header{Key: wire.Kafka.ContentTypeHeader(), Value: contentTypeStructured})
		wire.Kafka.IdentityHeaders(m, add)
	}
	if m.View != "" && s.HoldsState() {
		add(HeaderView, m.View)
	}
	start := 0
	for _, sp := range spans[:n] {
		rec.Headers[sp.header].Value = vals[start:sp.end:sp.end]
		start = sp.end
	}
	return rec, nil
}

// contentTypeStructured is the content-type of a structured-mode record,
// shared by every record: kafka-go only reads header values.
var contentTypeStructured = []byte(wire.Kafka.StructuredContentType())

// tombstone is the record that tells a compacted topic to forget key,
// after the deleted event m. Its headers name m's cluster, source and uid
// (wire.Kafka.TombstoneHeaders), so that a consumer of a topic several
// clusters write to applies it only to the cluster it names. The key
// already names the namespace and the name, which are left out: a
// tombstone is written even for an object whose name makes its event too
// large to publish, and must not become too large itself.
func tombstone(topic string, key []byte, m *wire.Message) kafkago.Message {
	rec := kafkago.Message{Topic: topic, Key: key, Headers: make([]kafkago.Header, 0, 3)}
	wire.Kafka.TombstoneHeaders(m, func(name, value string) {
		rec.Headers = append(rec.Headers, kafkago.Header{Key: name, Value: []byte(value)})
	})
	return rec
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
