package e2e

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// kafkaEnv is the environment of a bridge that publishes to c, with
// key-value pairs on top.
func kafkaEnv(c *kafkatest.Cluster, kv ...string) map[string]string {
	env := map[string]string{"BRIDGE_SINK": "kafka", "BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ",")}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// kafkaRecord is one record of a topic: an event, or a tombstone (msg nil).
type kafkaRecord struct {
	key       string
	partition int32
	offset    int64
	msg       *wire.Message
	headers   map[string]string
}

// decodeRecord decodes r, a record of the bridge's, and returns its event,
// nil for a tombstone, with its headers. It fails the test if r is not
// the bridge's.
func decodeRecord(t *testing.T, r *kgo.Record) (*wire.Message, map[string]string) {
	t.Helper()
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	m, err := wire.Kafka.Decode(r.Value, maps.All(h))
	if err != nil {
		t.Fatalf("%s[%d]@%d: %v", r.Topic, r.Partition, r.Offset, err)
	}
	return m, h
}

// readTopic returns the records of topic, in log order per partition.
func readTopic(t *testing.T, c *kafkatest.Cluster, topic string) []kafkaRecord {
	t.Helper()
	var out []kafkaRecord
	for _, r := range c.ReadAll(topic) {
		m, h := decodeRecord(t, r)
		out = append(out, kafkaRecord{key: string(r.Key), partition: r.Partition, offset: r.Offset, msg: m, headers: h})
	}
	return out
}

// recordsByKey groups records by key, keeping their order.
func recordsByKey(recs []kafkaRecord) map[string][]kafkaRecord {
	out := map[string][]kafkaRecord{}
	for _, r := range recs {
		out[r.key] = append(out[r.key], r)
	}
	return out
}
