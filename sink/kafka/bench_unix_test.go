//go:build unix

package kafka

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/synthetic"
	"github.com/kubebus/bridge/wire"
)

// BenchmarkPublishConcurrent publishes updates of 20,000 distinct
// ConfigMaps (about 1 KiB each), or of 4,000 Pods (about 10 KiB), to a
// kfake cluster in batches of 500 from
// 4 goroutines, as the pipeline's workers hand them over, and reports the
// rate and the CPU of the whole process (the in-process brokers included)
// per message, and the records per produce request. Beside the sink, kafka-go's Writer with the sink's former
// settings (batches of 500 records or 10 ms, murmur2 partitioning,
// acks=all) writes the sink's records of the same changes.
func BenchmarkPublishConcurrent(b *testing.B) {
	for _, w := range []struct {
		kind   string
		count  int
		object func(int) runtime.Object
	}{
		{"ConfigMaps", 20_000, func(i int) runtime.Object { return synthetic.ConfigMap(i) }},
		{"Pods", 4_000, func(i int) runtime.Object { return synthetic.Pod(i) }},
	} {
		b.Run(w.kind, func(b *testing.B) { benchmarkPublishConcurrent(b, w.count, w.object) })
	}
}

func benchmarkPublishConcurrent(b *testing.B, count int, object func(int) runtime.Object) {
	b.Run("sink", func(b *testing.B) {
		publishConcurrent(b, count, object, func(s *Sink) func(context.Context, []*wire.Message) error { return s.Publish })
	})
	b.Run("kafka-go Writer", func(b *testing.B) {
		publishConcurrent(b, count, object, func(s *Sink) func(context.Context, []*wire.Message) error {
			w := &kafkago.Writer{
				Addr: s.addr, Transport: s.transport, Balancer: kafkago.Murmur2Balancer{Consistent: true}, MaxAttempts: writeAttempts,
				BatchSize: s.cfg.BatchSize, BatchBytes: int64(s.cfg.MaxMessageBytes), BatchTimeout: s.cfg.BatchTimeout,
				WriteTimeout: writeTimeout, RequiredAcks: kafkago.RequireAll,
			}
			b.Cleanup(func() { w.Close() })
			return func(ctx context.Context, msgs []*wire.Message) error {
				recs := make([]kafkago.Message, len(msgs))
				for i, m := range msgs {
					var err error
					if recs[i], err = s.encode(m, s.cfg.TopicOf(m.Resource), []byte(s.cfg.KeyOf(m))); err != nil {
						return err
					}
				}
				return w.WriteMessages(ctx, recs...)
			}
		})
	})
}

func publishConcurrent(b *testing.B, count int, object func(int) runtime.Object, publisher func(*Sink) func(context.Context, []*wire.Message) error) {
	const batch, workers = 500, 4
	c := kafkatest.Start(b)
	var requests atomic.Int64
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		requests.Add(1)
		return nil, nil, false
	})
	cfg := settings(b, map[string]string{"BRIDGE_KAFKA_BROKERS": joinAddrs(c.Addrs()), "BRIDGE_KAFKA_PARTITIONS": "10"})
	s, err := New(b.Context(), cfg, []schema.GroupVersionResource{synthetic.ConfigMaps.GroupVersionResource, synthetic.Pods.GroupVersionResource}, Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	publish := publisher(s)
	msgs := make([]*wire.Message, count)
	for i := range msgs {
		obj := object(i)
		resource := synthetic.ConfigMaps
		if _, ok := obj.(*corev1.Pod); ok {
			resource = synthetic.Pods
		}
		d := synthetic.Update(resource, obj, time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
		if msgs[i], err = (event.Encoder{Cluster: "prod"}).Encode(&d); err != nil {
			b.Fatal(err)
		}
	}
	var cpu time.Duration
	for b.Loop() {
		before := processCPU()
		var (
			next   atomic.Int64
			wg     sync.WaitGroup
			failed atomic.Value
		)
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(batch)) - batch
					if i >= count {
						return
					}
					if err := publish(b.Context(), msgs[i:min(i+batch, count)]); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - before
	}
	n := float64(b.N * count)
	b.ReportMetric(n/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
	b.ReportMetric(n/float64(requests.Load()), "msg/request")
}

// processCPU is the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
