package e2e

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
)

// bus is a message bus the bridge publishes to, for the tests that run the
// same scenario against every sink.
type bus interface {
	// name is "nats" or "kafka".
	name() string
	// env configures a bridge for this bus, with its checkpoint kept in it.
	env(ns string) map[string]string
	// read returns every event the bus holds about ConfigMaps of ns, in
	// per-object stream order (tombstones left out).
	read(t *testing.T, ns string) []*sink.Message
	// stop makes the bus unavailable; start makes it available again with
	// what it stored.
	stop(t *testing.T)
	start(t *testing.T)
}

// forEachBus runs f as a subtest for each kind of bus.
func forEachBus(t *testing.T, f func(t *testing.T, b bus)) {
	for _, name := range []string{"nats", "kafka"} {
		t.Run(name, func(t *testing.T) {
			var b bus
			if name == "nats" {
				b = newNATSBus(t)
			} else {
				b = newKafkaBus(t)
			}
			f(t, b)
		})
	}
}

type natsBus struct {
	srv *natstest.Server
	nc  *nats.Conn // the reader's connection, made on first read
}

func newNATSBus(t *testing.T) *natsBus { return &natsBus{srv: natstest.Start(t, natstest.Options{})} }

func (b *natsBus) name() string { return "nats" }

func (b *natsBus) env(ns string) map[string]string {
	return natsEnv(b.srv, ns, map[string]string{"BRIDGE_CHECKPOINT": "nats-kv:ckpt-" + ns})
}

func (b *natsBus) read(t *testing.T, ns string) []*sink.Message {
	var out []*sink.Message
	cfg := jetstream.ConsumerConfig{FilterSubject: natsSubjects(ns), AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute}
	if b.nc == nil {
		b.nc = b.srv.Conn(t)
	}
	for _, e := range natsFetch(t, b.nc, "KUBE", cfg, false) {
		out = append(out, e.msg)
	}
	return out
}

func (b *natsBus) stop(t *testing.T)  { b.srv.Shutdown() }
func (b *natsBus) start(t *testing.T) { b.srv.Start() }

type kafkaBus struct {
	c *kafkatest.Cluster
	// down is true during an outage; refused counts the requests the
	// cluster turned away meanwhile.
	down    atomic.Bool
	refused atomic.Int64
	control sync.Once
}

func newKafkaBus(t *testing.T) *kafkaBus { return &kafkaBus{c: kafkatest.Start(t)} }

func (b *kafkaBus) name() string { return "kafka" }

func (b *kafkaBus) env(ns string) map[string]string {
	return kafkaEnv(b.c,
		"BRIDGE_RESOURCES", "configmaps",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CLUSTER_NAME", "e2e",
		"BRIDGE_KAFKA_TOPIC_PREFIX", "kube-"+ns,
		"BRIDGE_CHECKPOINT", "kafka:ckpt-"+ns)
}

func (b *kafkaBus) read(t *testing.T, ns string) []*sink.Message {
	var out []*sink.Message
	for _, r := range readTopic(t, b.c, "kube-"+ns+".configmaps") {
		if r.msg != nil && strings.HasPrefix(r.key, ns+"/") {
			out = append(out, r.msg)
		}
	}
	return out
}

// errBrokerDown is what the cluster answers every request with during an
// outage: kfake then closes the client's connection.
var errBrokerDown = errors.New("kafka bus: outage")

// stop makes every broker drop each connection a request arrives on, as a
// cluster that went away does: produce, metadata, ApiVersions and the rest
// all fail, so writes fail and health checks report it. kfake keeps no
// data across a restart, so the outage refuses requests instead of closing
// the cluster; start lets them through again, to what was stored before.
func (b *kafkaBus) stop(t *testing.T) {
	b.control.Do(func() {
		b.c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
			if !b.down.Load() {
				return nil, nil, false // served as usual
			}
			b.c.KeepControl()
			b.refused.Add(1)
			return nil, errBrokerDown, true
		})
	})
	b.down.Store(true)
}

func (b *kafkaBus) start(t *testing.T) { b.down.Store(false) }
