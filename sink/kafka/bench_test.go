package kafka

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/synthetic"
	"github.com/kubebus/bridge/wire"
)

// benchMessage is the bridge's message for an update of a ConfigMap of
// about 1 KiB or of a Pod of about 10 KiB.
func benchMessage(b *testing.B, kind string) *wire.Message {
	b.Helper()
	observed := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	var d source.Delta
	switch kind {
	case "ConfigMap":
		d = synthetic.Update(synthetic.ConfigMaps, synthetic.ConfigMap(7), observed)
	case "Pod":
		d = synthetic.Update(synthetic.Pods, synthetic.Pod(7), observed)
	}
	m, err := event.Encoder{Cluster: "prod"}.Encode(&d)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkRecord builds the record of an event as Publish does: topic,
// key, value and headers, in both content modes.
func BenchmarkRecord(b *testing.B) {
	for _, mode := range []CEMode{ModeStructured, ModeBinary} {
		for _, kind := range []string{"ConfigMap", "Pod"} {
			b.Run(string(mode)+"/"+kind, func(b *testing.B) {
				cfg := settings(b, map[string]string{"BRIDGE_KAFKA_BROKERS": "127.0.0.1:9092", "BRIDGE_KAFKA_CE_MODE": string(mode)})
				s := &Sink{cfg: cfg}
				m := benchMessage(b, kind)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.encode(m, s.cfg.TopicOf(m.Resource), []byte(s.cfg.KeyOf(m))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRounds turns a batch of 500 messages of distinct ConfigMaps
// into the rounds of records Publish writes, without writing them.
func BenchmarkRounds(b *testing.B) {
	cfg := settings(b, map[string]string{"BRIDGE_KAFKA_BROKERS": "127.0.0.1:9092"})
	s := &Sink{cfg: cfg}
	msgs := make([]*wire.Message, 500)
	for i := range msgs {
		d := synthetic.Update(synthetic.ConfigMaps, synthetic.ConfigMap(i), time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
		m, err := event.Encoder{Cluster: "prod"}.Encode(&d)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = m
	}
	encode := func(_ context.Context, round []*wire.Message) []error {
		errs := make([]error, len(round))
		s.events(round, errs)
		return errs
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := sink.PublishInOrder(b.Context(), msgs, encode); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}

// BenchmarkKeyOf builds a record key, with a topic per resource and with
// one topic for all.
func BenchmarkKeyOf(b *testing.B) {
	m := message(deployments, "team-a", "web", "updated", 7)
	for _, tt := range []struct{ name, topic string }{{"topic per resource", ""}, {"one topic", "kube.all"}} {
		b.Run(tt.name, func(b *testing.B) {
			cfg := Config{TopicPrefix: "kube", Topic: tt.topic}
			b.ReportAllocs()
			for b.Loop() {
				_ = cfg.KeyOf(m)
			}
		})
	}
}

// BenchmarkPublishOne publishes one change at a time, each acknowledged
// before the next goes, to a kfake cluster with the default settings: the
// latency of a lone change.
func BenchmarkPublishOne(b *testing.B) {
	c := kafkatest.Start(b)
	cfg := settings(b, map[string]string{"BRIDGE_KAFKA_BROKERS": joinAddrs(c.Addrs())})
	s, err := New(b.Context(), cfg, []schema.GroupVersionResource{configmaps}, Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	m := benchMessage(b, "ConfigMap")
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Publish(b.Context(), []*wire.Message{m}); err != nil {
			b.Fatal(err)
		}
	}
}
