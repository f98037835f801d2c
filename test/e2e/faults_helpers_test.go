package e2e

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/sink"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
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

func (g *gateSink) Publish(ctx context.Context, msgs []*wire.Message) error {
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

func (g *gateSink) probeOnly(msgs []*wire.Message) bool {
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
		s, err = kafkasink.New(t.Context(), cfg.KafkaSettings(), []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}}, kafkasink.Options{}, log)
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

// busReader polls what a bus holds about the objects of a scope (the
// ConfigMaps of one namespace, unless told otherwise) with bus.readKinds,
// while the bridge may still be publishing, and keeps the oracle's last
// verdict.
type busReader struct {
	b bus
	s scope

	last time.Time
	v    verdict
}

func newBusReader(t *testing.T, b bus, ns string) *busReader {
	t.Helper()
	return newScopeReader(t, b, scope{ns: ns, kinds: []watchedKind{configMaps}})
}

func newScopeReader(t *testing.T, b bus, s scope) *busReader {
	t.Helper()
	return &busReader{b: b, s: s}
}

// read returns the events on the bus, at least those it held when read
// began.
func (r *busReader) read(t *testing.T) []*wire.Message {
	t.Helper()
	return r.b.readKinds(t, r.s.ns, r.s.kinds)
}

// converge waits until the oracle finds the bus's view equal to the API
// server's LIST, reading the bus at most every 250ms (a Kafka read costs
// new clients), and returns the verdict and how long it took.
func (r *busReader) converge(t *testing.T, timeout time.Duration) (verdict, time.Duration) {
	t.Helper()
	began := time.Now()
	r.v = verdict{mismatch: "not read yet"}
	poll.Until(t, timeout, func() (bool, string) {
		if time.Since(r.last) >= 250*time.Millisecond {
			r.last = time.Now()
			r.v = r.s.judge(t, r.read(t))
		}
		return r.v.mismatch == "", r.v.mismatch
	})
	return r.v, time.Since(began)
}
