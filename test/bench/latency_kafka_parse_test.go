package bench

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLatencyProduced checks that the Kafka latency row finds, in a
// produce request as a client encodes it, the object and resourceVersion
// of every event record, across batches, and skips compressed batches and
// records that are not events.
func TestLatencyProduced(t *testing.T) {
	batch := func(attrs int16, recs ...kmsg.Record) []byte {
		var raw []byte
		for i, r := range recs {
			r.OffsetDelta = int32(i)
			body := r.AppendTo(nil)
			r.Length = int32(len(body) - 1) // AppendTo wrote a zero length of one byte
			raw = r.AppendTo(raw)
		}
		b := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1), NumRecords: int32(len(recs)), Records: raw}
		b.Length = int32(len(b.AppendTo(nil)) - 12)
		return b.AppendTo(nil)
	}
	event := func(key, rv string) kmsg.Record {
		return kmsg.Record{Key: []byte(key), Value: []byte("{}"), Headers: []kmsg.Header{
			{Key: "ce_id", Value: []byte("x")}, {Key: "ce_resourceversion", Value: []byte(rv)}}}
	}
	records := append(batch(0, event("latency/cm-0001", "41"), event("cm-0002", "42")),
		batch(0, kmsg.Record{Key: []byte("latency/cm-0003"), Value: []byte("{}")}, event("latency/cm-0004", "44"))...)
	records = append(records, batch(1, event("latency/cm-0005", "45"))...) // gzip: skipped
	req := &kmsg.ProduceRequest{Topics: []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: records}}}}}

	var got []latencyKey
	latencyProduced(req, func(k latencyKey) { got = append(got, k) })
	want := []latencyKey{{"cm-0001", "41"}, {"cm-0002", "42"}, {"cm-0004", "44"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
