package e2e

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/sink"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	natssink "github.com/kubebus/bridge/sink/nats"
)

// gateSink wraps a real sink. While the gate is shut, Publish holds every
// batch, accepting nothing, until the gate opens or the caller's context
// ends; while it is open, batches go straight through. Batches of the
// probe object alone always go through, so that a test can tell when the
// bridge has seen a change made after all the others.
type gateSink struct {
	sink.Sink
	probe string // key of the probe object; "" for none

	mu      sync.Mutex
	shutCh  chan struct{} // nil while open; closed by open
	held    int           // messages in Publish calls waiting at the gate
	bytes   int           // capacity of their data
	calls   int           // Publish calls waiting at the gate
	probeRV string        // newest resourceVersion of the probe accepted
	passed  int           // messages the wrapped sink accepted
}

var _ sink.Sink = (*gateSink)(nil)

func (g *gateSink) Publish(ctx context.Context, msgs []*sink.Message) error {
	if g.probeOnly(msgs) {
		err := g.Sink.Publish(ctx, msgs)
		if err == nil {
			g.mu.Lock()
			g.probeRV = msgs[len(msgs)-1].ResourceVersion
			g.passed += len(msgs)
			g.mu.Unlock()
		}
		return err
	}
	size := 0
	for _, m := range msgs {
		size += cap(m.Data)
	}
	g.mu.Lock()
	ch := g.shutCh
	if ch != nil {
		g.held += len(msgs)
		g.bytes += size
		g.calls++
	}
	g.mu.Unlock()
	if ch != nil {
		defer func() {
			g.mu.Lock()
			g.held -= len(msgs)
			g.bytes -= size
			g.calls--
			g.mu.Unlock()
		}()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := g.Sink.Publish(ctx, msgs)
	if err == nil {
		g.mu.Lock()
		g.passed += len(msgs)
		g.mu.Unlock()
	}
	return err
}

func (g *gateSink) probeOnly(msgs []*sink.Message) bool {
	if g.probe == "" || len(msgs) == 0 {
		return false
	}
	for _, m := range msgs {
		if m.Key() != g.probe {
			return false
		}
	}
	return true
}

// shut makes Publish hold every batch from now on.
func (g *gateSink) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutCh == nil {
		g.shutCh = make(chan struct{})
	}
}

// open lets the held batches, and every later one, through.
func (g *gateSink) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutCh != nil {
		close(g.shutCh)
		g.shutCh = nil
	}
}

// waiting reports the Publish calls held at the gate, their messages, and
// the capacity of those messages' data.
func (g *gateSink) waiting() (calls, msgs, bytes int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, g.held, g.bytes
}

// accepted reports how many messages the wrapped sink accepted in
// batches that it accepted whole.
func (g *gateSink) accepted() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passed
}

// probeAt reports the newest resourceVersion of the probe object the sink
// accepted.
func (g *gateSink) probeAt() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.probeRV
}

// busSink builds the sink a bridge configured by env would open itself
// (NATS or Kafka), for ConfigMaps.
func busSink(t *testing.T, env map[string]string) sink.Sink {
	t.Helper()
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "sink")
	var s sink.Sink
	switch cfg.Sink {
	case config.SinkNATS:
		s, err = natssink.New(t.Context(), cfg.NATSSettings(), log)
	case config.SinkKafka:
		s, err = kafkasink.New(t.Context(), cfg.KafkaSettings(), []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}}, log)
	default:
		t.Fatalf("no bus sink in BRIDGE_SINK=%q", cfg.Sink)
	}
	if err != nil {
		t.Fatalf("%s sink: %v", cfg.Sink, err)
	}
	return s
}

// fastKube is a client without client-side rate limiting, for writers
// that must make thousands of changes quickly.
func fastKube(t *testing.T) kubernetes.Interface {
	t.Helper()
	rc := cp.RESTConfig()
	rc.QPS = -1 // no client-side limit
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// liveHeap collects garbage and returns the heap statistics right after.
func liveHeap() runtime.MemStats {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// mib formats a byte count in MiB.
func mib(n int64) float64 { return float64(n) / (1 << 20) }

// busReader reads what a bus holds about the objects of a scope (the
// ConfigMaps of one namespace, unless told otherwise), like bus.read, but
// is made to be polled while the bridge is still publishing. (For NATS,
// bus.read counts a message that arrives during the read as an error; for
// Kafka, each bus.read leaves two clients fetching until the test ends.)
type busReader struct {
	b bus
	s scope

	js jetstream.JetStream // NATS

	kc     *kgo.Client // Kafka: one consumer, reading on from where it stopped
	adm    *kadm.Client
	topics []string
	next   map[topicPartition]int64 // next offset to read
	msgs   []*sink.Message          // everything read so far, in per-partition order

	last time.Time
	v    verdict
}

type topicPartition struct {
	topic     string
	partition int32
}

func newBusReader(t *testing.T, b bus, ns string) *busReader {
	t.Helper()
	return newScopeReader(t, b, scope{ns: ns, kinds: []watchedKind{configMaps}})
}

func newScopeReader(t *testing.T, b bus, s scope) *busReader {
	t.Helper()
	r := &busReader{b: b, s: s}
	switch bb := b.(type) {
	case *natsBus:
		js, err := jetstream.New(bb.srv.Conn(t))
		if err != nil {
			t.Fatal(err)
		}
		r.js = js
	case *kafkaBus:
		for _, k := range s.kinds {
			r.topics = append(r.topics, kafkaTopic(s.ns, k))
		}
		r.kc = bb.c.Client(kgo.ConsumeTopics(r.topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		r.adm = kadm.NewClient(bb.c.Client())
		r.next = map[topicPartition]int64{}
	default:
		t.Fatalf("no reader for bus %T", b)
	}
	return r
}

// read returns the events on the bus, at least those it held when read
// began.
func (r *busReader) read(t *testing.T) []*sink.Message {
	t.Helper()
	if r.kc != nil {
		return r.readKafka(t)
	}
	return r.readNATS(t)
}

func (r *busReader) readNATS(t *testing.T) []*sink.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cons, err := r.js.CreateConsumer(ctx, "KUBE", jetstream.ConsumerConfig{
		FilterSubjects:    natsKindSubjects(r.s.ns, r.s.kinds),
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer func() { _ = r.js.DeleteConsumer(ctx, "KUBE", cons.CachedInfo().Name) }()
	want := int(cons.CachedInfo().NumPending)
	var out []*sink.Message
	for len(out) < want {
		batch, err := cons.Fetch(min(want-len(out), 256), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			d, err := natssink.Decode(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
			if err != nil {
				t.Fatalf("message on %.200s: %v", m.Subject(), err)
			}
			out = append(out, d)
		}
		if batch.Error() != nil || got == 0 {
			t.Fatalf("fetch after %d of %d messages: got %d, %v", len(out), want, got, batch.Error())
		}
	}
	return out[:want]
}

func (r *busReader) readKafka(t *testing.T) []*sink.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, r.topics...)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", r.topics, err)
	}
	behind := func() bool {
		short := false
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && r.next[topicPartition{o.Topic, o.Partition}] < o.Offset {
				short = true
			}
		})
		return short
	}
	for behind() {
		fetches := r.kc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %v", r.topics, err)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("read %s partition %d: %v", topic, p, err)
		})
		fetches.EachRecord(func(rec *kgo.Record) {
			r.next[topicPartition{rec.Topic, rec.Partition}] = rec.Offset + 1
			h := map[string]string{}
			for _, x := range rec.Headers {
				h[x.Key] = string(x.Value)
			}
			m, err := kafkasink.DecodeRecord(rec.Value, h)
			if err != nil {
				t.Fatalf("%s[%d]@%d: %v", rec.Topic, rec.Partition, rec.Offset, err)
			}
			if m != nil && strings.HasPrefix(string(rec.Key), r.s.ns+"/") {
				r.msgs = append(r.msgs, m)
			}
		})
	}
	return slices.Clone(r.msgs)
}

// converge waits until the oracle finds the bus's view equal to the API
// server's LIST, reading the bus at most every 250ms (a Kafka read costs
// new clients), and returns the verdict and how long it took.
func (r *busReader) converge(t *testing.T, timeout time.Duration) (verdict, time.Duration) {
	t.Helper()
	began := time.Now()
	r.v = verdict{mismatch: "not read yet"}
	eventually(t, timeout, func() (bool, string) {
		if time.Since(r.last) >= 250*time.Millisecond {
			r.last = time.Now()
			r.v = r.s.judge(t, r.read(t))
		}
		return r.v.mismatch == "", r.v.mismatch
	})
	return r.v, time.Since(began)
}
