package metrics

import "github.com/prometheus/client_golang/prometheus"

func newNotCompacted() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bridge_kafka_topic_not_compacted",
		Help: "With BRIDGE_KAFKA_LAYOUT=state, 1 for a topic the bridge writes that exists without compaction (its cleanup.policy lacks compact), so records of objects that do not change expire and a consumer that starts later misses them; 0 for a compacted one. Set at start-up; absent when the topic's configs could not be read.",
	}, []string{"topic"})
}

// KafkaTopicCompacted records whether a topic of the Kafka sink's state
// layout is compacted.
func (m *Metrics) KafkaTopicCompacted(topic string, compacted bool) {
	v := 1.0
	if compacted {
		v = 0
	}
	m.notCompacted.WithLabelValues(topic).Set(v)
}
