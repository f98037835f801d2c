package e2e

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kmsg"

	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
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
	read(t *testing.T, ns string) []*wire.Message
	// readKinds is read for the objects of several kinds.
	readKinds(t *testing.T, ns string, kinds []watchedKind) []*wire.Message
	// stop makes the bus unavailable; start makes it available again with
	// what it stored.
	stop(t *testing.T)
	start(t *testing.T)
}

// busOptions shape the buses of forEachBusWith. The zero value is a bus
// with its usual limits.
type busOptions struct {
	// maxMessageBytes, when positive, is the largest message the bus
	// takes: the NATS server's max_payload, or the Kafka sink's
	// BRIDGE_KAFKA_MAX_MESSAGE_BYTES.
	maxMessageBytes int
	// natsLayout is the NATS stream's BRIDGE_NATS_LAYOUT; "" is history,
	// where read finds every change of an object. In the state layout
	// read finds each object's latest message.
	natsLayout string
}

// forEachBus runs f as a subtest for each kind of bus.
func forEachBus(t *testing.T, f func(t *testing.T, b bus)) {
	forEachBusWith(t, busOptions{}, f)
}

// forEachBusWith runs f as a subtest for each kind of bus, shaped by o.
func forEachBusWith(t *testing.T, o busOptions, f func(t *testing.T, b bus)) {
	for _, name := range []string{"nats", "kafka"} {
		t.Run(name, func(t *testing.T) {
			var b bus
			if name == "nats" {
				b = newNATSBus(t, o)
			} else {
				b = newKafkaBus(t, o)
			}
			f(t, b)
		})
	}
}

type natsBus struct {
	srv    *natstest.Server
	layout string
	nc     *nats.Conn // the reader's connection, made on first read
}

func newNATSBus(t *testing.T, o busOptions) *natsBus {
	layout := o.natsLayout
	if layout == "" {
		layout = string(natssink.LayoutHistory)
	}
	return &natsBus{srv: natstest.Start(t, natstest.Options{MaxPayload: int32(o.maxMessageBytes)}), layout: layout}
}

func (b *natsBus) name() string { return "nats" }

func (b *natsBus) env(ns string) map[string]string {
	return natsEnv(b.srv, ns, map[string]string{"BRIDGE_CHECKPOINT": "nats-kv:ckpt-" + ns, "BRIDGE_NATS_LAYOUT": b.layout})
}

func (b *natsBus) read(t *testing.T, ns string) []*wire.Message {
	return b.readKinds(t, ns, []watchedKind{configMaps})
}

func (b *natsBus) readKinds(t *testing.T, ns string, kinds []watchedKind) []*wire.Message {
	var out []*wire.Message
	cfg := jetstream.ConsumerConfig{FilterSubjects: natsLayoutSubjects(b.layout, ns, kinds), AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute}
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
	c    *kafkatest.Cluster
	opts busOptions
	// down is true during an outage; refused counts the requests the
	// cluster turned away meanwhile.
	down    atomic.Bool
	refused atomic.Int64
	control sync.Once
}

func newKafkaBus(t *testing.T, o busOptions) *kafkaBus {
	return &kafkaBus{c: kafkatest.Start(t), opts: o}
}

func (b *kafkaBus) name() string { return "kafka" }

func (b *kafkaBus) env(ns string) map[string]string {
	env := kafkaEnv(b.c,
		"BRIDGE_RESOURCES", "configmaps",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CLUSTER_NAME", "e2e",
		"BRIDGE_KAFKA_TOPIC_PREFIX", "kube-"+ns,
		"BRIDGE_CHECKPOINT", "kafka:ckpt-"+ns)
	if b.opts.maxMessageBytes > 0 {
		env["BRIDGE_KAFKA_MAX_MESSAGE_BYTES"] = strconv.Itoa(b.opts.maxMessageBytes)
	}
	return env
}

// kafkaTopic is the topic of the objects of kind k in ns, as b.env(ns)
// makes them.
func kafkaTopic(ns string, k watchedKind) string {
	return wire.TopicFor("kube-"+ns, k.gvr.GroupResource())
}

// records returns every record of the ConfigMaps of ns, tombstones
// included, in per-key log order.
func (b *kafkaBus) records(t *testing.T, ns string) []kafkaRecord {
	return b.recordsOf(t, ns, []watchedKind{configMaps})
}

// recordsOf is records for the objects of several kinds.
func (b *kafkaBus) recordsOf(t *testing.T, ns string, kinds []watchedKind) []kafkaRecord {
	var out []kafkaRecord
	for _, k := range kinds {
		for _, r := range readTopic(t, b.c, kafkaTopic(ns, k)) {
			if strings.HasPrefix(r.key, ns+"/") {
				out = append(out, r)
			}
		}
	}
	return out
}

func (b *kafkaBus) read(t *testing.T, ns string) []*wire.Message {
	return b.readKinds(t, ns, []watchedKind{configMaps})
}

func (b *kafkaBus) readKinds(t *testing.T, ns string, kinds []watchedKind) []*wire.Message {
	var out []*wire.Message
	for _, r := range b.recordsOf(t, ns, kinds) {
		if r.msg != nil {
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
