package bench

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/config"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/synthetic"
	"github.com/kubebus/bridge/wire"
)

// kafkaBus is Kafka on an in-process kfake cluster of three brokers.
type kafkaBus struct {
	recs []kafkago.Message // what the sink writes for the workload
}

func (*kafkaBus) Name() string { return "Kafka" }

func (*kafkaBus) BaselineName() string { return "kafka-go Writer" }

func (*kafkaBus) Settings() string {
	return "kfake, 3 brokers, the topics the bridge creates (10 partitions); on either side acks=all, up to 500 records per partition in a request, " +
		"murmur2 partitioning, no compression; bridge: its defaults (4 workers, batches of 500, structured mode; one produce request per broker, sent at once when none is in flight to it, " +
		"the records that come meanwhile waiting for its answer, or 10 ms), checkpoint in a bbolt file, its flush of the run's positions inside the measured window; " +
		"baseline: the bridge's records (topic, key, headers, value) written by 4 goroutines in WriteMessages calls of 500, each partition's batch sent when full or after 10 ms"
}

// kafkaResources are the resources whose topics the sink creates.
var kafkaResources = []schema.GroupVersionResource{synthetic.ConfigMaps.GroupVersionResource, synthetic.Pods.GroupVersionResource}

// kafkaConfig is the bridge's configuration for c.
func kafkaConfig(b *testing.B, c *kafkatest.Cluster) *config.Config {
	return loadConfig(b, map[string]string{"BRIDGE_SINK": "kafka", "BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ",")})
}

// newKafkaSink opens the bridge's sink on c, which creates the topics.
func newKafkaSink(b *testing.B, cfg *config.Config) *kafkasink.Sink {
	b.Helper()
	s, err := kafkasink.New(context.Background(), cfg.KafkaSettings(), kafkaResources, kafkasink.Options{}, benchLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// Prepare builds the records the sink writes for wl in structured mode:
// the resource's topic, the object's key, the sink's headers and the event
// as the value. They do not depend on the brokers' addresses.
func (kb *kafkaBus) Prepare(b *testing.B, wl *workload) {
	b.Helper()
	cfg := loadConfig(b, map[string]string{"BRIDGE_SINK": "kafka", "BRIDGE_KAFKA_BROKERS": "127.0.0.1:9092"}).Kafka
	kb.recs = make([]kafkago.Message, len(wl.msgs))
	for i, m := range wl.msgs {
		kb.recs[i] = kafkago.Message{
			Topic: cfg.TopicOf(m.Resource),
			Key:   []byte(cfg.KeyOf(m)),
			Value: wl.bodies[i],
			Headers: []kafkago.Header{
				{Key: wire.Kafka.ContentTypeHeader(), Value: []byte(wire.KafkaStructuredContentType)},
				{Key: wire.Kafka.HeaderOf("id"), Value: []byte(m.ID)},
				{Key: wire.Kafka.HeaderOf("type"), Value: []byte(m.Type)},
				{Key: wire.Kafka.HeaderOf("resourceversion"), Value: []byte(m.ResourceVersion)},
				{Key: wire.Kafka.HeaderOf("uid"), Value: []byte(m.UID)},
			},
		}
	}
}

func (kb *kafkaBus) Bridge(b *testing.B, wl *workload, verify bool) runResult {
	b.Helper()
	c := kafkatest.Start(b)
	cfg := kafkaConfig(b, c)
	s := newKafkaSink(b, cfg)
	r := runPipeline(b, cfg, s, wl.deltas, wl.via)
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	checkKafkaCount(b, c, kb.recs[0].Topic, len(kb.recs))
	if verify {
		kb.check(b, c, wl.via != nil)
	}
	return r
}

// Baseline writes the prepared records with a kafka-go Writer configured
// as the sink's writer, from as many goroutines as the bridge has workers,
// each writing batches of the pipeline's size, and measures until every
// write returned.
func (kb *kafkaBus) Baseline(b *testing.B, _ *workload) runResult {
	b.Helper()
	c := kafkatest.Start(b)
	cfg := kafkaConfig(b, c)
	// The bridge's own code creates the topics, so that both sides write
	// to the same kind of topic.
	if err := newKafkaSink(b, cfg).Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	topic := kb.recs[0].Topic
	conn := cfg.KafkaSettings().Conn()
	transport := conn.Transport(ctx, []string{topic})
	defer transport.CloseIdleConnections()
	w := &kafkago.Writer{
		Addr:         conn.Addr(),
		Balancer:     kafkago.Murmur2Balancer{Consistent: true},
		MaxAttempts:  3,
		BatchSize:    cfg.Kafka.BatchSize,
		BatchBytes:   int64(cfg.Kafka.MaxMessageBytes),
		BatchTimeout: cfg.Kafka.BatchTimeout,
		WriteTimeout: 30 * time.Second,
		RequiredAcks: kafkago.RequireAll,
		Transport:    transport,
	}
	defer w.Close()
	// The writer looks the topic up on its first write: do that off the
	// clock, as the bridge's sink did when it checked its topics.
	client := &kafkago.Client{Addr: w.Addr, Transport: transport}
	if _, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}}); err != nil {
		b.Fatal(err)
	}
	recs := append([]kafkago.Message(nil), kb.recs...) // the writer may keep what it is given
	chunk := cfg.BatchSize

	var (
		next   atomic.Int64
		failed atomic.Value
	)
	r := timed(func() {
		var wg sync.WaitGroup
		for range cfg.Workers {
			wg.Go(func() {
				for {
					i := int(next.Add(int64(chunk))) - chunk
					if i >= len(recs) {
						return
					}
					if err := w.WriteMessages(ctx, recs[i:min(i+chunk, len(recs))]...); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("baseline: write: %v", err)
	}
	checkKafkaCount(b, c, topic, len(recs))
	return r
}

// checkKafkaCount fails unless topic holds n records: the side that wrote
// it wrote every record once.
func checkKafkaCount(b *testing.B, c *kafkatest.Cluster, topic string, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(n) {
		b.Fatalf("topic %s holds %d records, want %d", topic, total, n)
	}
}

// check fails unless the first record of a partition, read with franz-go,
// is exactly the record the baseline writes for its key.
func (kb *kafkaBus) check(b *testing.B, c *kafkatest.Cluster, viewed bool) {
	b.Helper()
	topic := kb.recs[0].Topic
	got := firstRecord(b, c, topic)
	for _, want := range kb.recs {
		if !bytes.Equal(want.Key, got.Key) {
			continue
		}
		if !bytes.Equal(want.Value, got.Value) {
			b.Fatalf("record %q: the bridge wrote a value of %d bytes that differs from the baseline's %d", want.Key, len(got.Value), len(want.Value))
		}
		if viewed {
			// Under a view a record also carries the object's view state,
			// last, which the baseline has no view to make.
			last := len(got.Headers) - 1
			if last < 0 || got.Headers[last].Key != wire.Kafka.ViewHeader() {
				b.Fatalf("record %q: no %s header under a view", want.Key, wire.Kafka.ViewHeader())
			}
			got.Headers = got.Headers[:last]
		}
		if len(got.Headers) != len(want.Headers) {
			b.Fatalf("record %q: the bridge wrote %d headers, the baseline %d", want.Key, len(got.Headers), len(want.Headers))
		}
		for i, h := range want.Headers {
			if got.Headers[i].Key != h.Key || !bytes.Equal(got.Headers[i].Value, h.Value) {
				b.Fatalf("record %q: header %d is %s=%q, the baseline's %s=%q", want.Key, i, got.Headers[i].Key, got.Headers[i].Value, h.Key, h.Value)
			}
		}
		return
	}
	b.Fatalf("topic %s: the baseline has no record with the key %q", topic, got.Key)
}

// firstRecord is the first record of partition 0 of topic, read with
// franz-go.
func firstRecord(b *testing.B, c *kafkatest.Cluster, topic string) *kgo.Record {
	b.Helper()
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollRecords(ctx, 1)
		if err := ctx.Err(); err != nil {
			b.Fatalf("reading topic %s: %v", topic, err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}
