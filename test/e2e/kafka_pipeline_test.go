package e2e

// The bridge's pipeline publishing to the Kafka sink, against an in-process
// cluster: order and exactly-once delivery at volume, and a broker outage.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/sink"
	kafkasink "github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Acceptance 1: 10,000 deltas of 1,000 objects, through the bridge's
// pipeline, into a topic of 6 partitions. A consumer group reads every
// delta exactly once, each object's deltas in one partition (the one
// PartitionFor names) and in resourceVersion order.
func TestManyObjectsInOrder(t *testing.T) {
	const (
		objects    = 1000
		perObject  = 10
		partitions = 6
	)
	c := kafkatest.Start(t)
	s := newKafkaSink(t, c, "BRIDGE_KAFKA_PARTITIONS", fmt.Sprint(partitions))
	if got := c.Partitions("kube.configmaps"); got != partitions {
		t.Fatalf("topic kube.configmaps has %d partitions, want %d", got, partitions)
	}
	st := startPipeline(t, s)

	start := time.Now()
	rv := 0
	for round := range perObject {
		for i := range objects {
			rv++
			typ := source.Updated
			if round == 0 {
				typ = source.Added
			}
			st.OnDelta(delta(fmt.Sprintf("cm-%04d", i), rv, typ))
		}
	}
	st.drain(t, 2*time.Minute)
	took := time.Since(start)
	stats := st.Stats()
	if stats.Published != objects*perObject || stats.Skipped+stats.Retried+stats.Coalesced+stats.Abandoned != 0 {
		t.Fatalf("pipeline stats %+v, want %d published and nothing else", stats, objects*perObject)
	}
	t.Logf("published %d deltas of %d objects to %d partitions in %s (%.0f/s)",
		objects*perObject, objects, partitions, took.Round(time.Millisecond), float64(objects*perObject)/took.Seconds())

	start = time.Now()
	recs := groupRead(t, c, "acceptance-1", objects*perObject, "kube.configmaps")
	t.Logf("consumer group read %d records in %s", len(recs), time.Since(start).Round(time.Millisecond))
	// Anything more than the deltas would be a repeat: the log must hold
	// exactly as many records as were published.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ends, err := c.Admin().ListEndOffsets(ctx, "kube.configmaps")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	perPartition := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset; perPartition[o.Partition] = o.Offset })
	if total != objects*perObject || len(recs) != objects*perObject {
		t.Fatalf("topic holds %d records, the group read %d; want exactly %d", total, len(recs), objects*perObject)
	}
	t.Logf("records per partition: %v", perPartition)

	h := histories(t, recs)
	for _, p := range h.problems {
		t.Error(p)
	}
	if len(h.rvs) != objects {
		t.Errorf("records about %d objects, want %d", len(h.rvs), objects)
	}
	for key, rvs := range h.rvs {
		if len(rvs) != perObject || !increasing(rvs) {
			t.Errorf("%s: resourceVersions %v, want %d increasing", key, rvs, perObject)
		}
		if want := int32(wire.PartitionFor([]byte(key), partitions)); h.partition[key] != want {
			t.Errorf("%s: in partition %d, PartitionFor says %d", key, h.partition[key], want)
		}
	}
	if len(perPartition) != partitions {
		t.Errorf("records in %d partitions, want all %d used", len(perPartition), partitions)
	}
}

// increasing reports whether every resourceVersion is above the one
// before it.
func increasing(rvs []int) bool {
	for i := 1; i < len(rvs); i++ {
		if rvs[i] <= rvs[i-1] {
			return false
		}
	}
	return true
}

// Acceptance 3: a broker becomes unavailable while the pipeline publishes.
// After it recovers nothing is lost and each object's deltas are in order.
// Where the broker refuses writes outright, nothing is repeated either;
// where it stored a write but answered with a timeout, the write may be
// repeated, right after itself.
func TestBrokerUnavailable(t *testing.T) {
	const objects, partitions = 200, 6
	tests := []struct {
		name string
		// outage makes node, the leader of partition 0, unavailable. It
		// returns how many writes the outage turned away so far, and a
		// function that ends the outage.
		outage func(t *testing.T, c *kafkatest.Cluster, node int32) (hits func() int, end func())
		// mayMiss is true when the client can miss the outage: after a
		// broker leaves, a metadata refresh that comes first sends every
		// write to the new leaders.
		mayMiss bool
		// repeats says whether a delta may reach the log more than once.
		repeats bool
	}{
		{
			name: "broker refuses writes",
			outage: func(t *testing.T, c *kafkatest.Cluster, node int32) (func() int, func()) {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Nodes: []int32{node}, Err: kerr.NotLeaderForPartition, Count: -1})
				return h.Hits, h.Remove
			},
		},
		{
			name: "broker stores writes but times out",
			outage: func(t *testing.T, c *kafkatest.Cluster, node int32) (func() int, func()) {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Nodes: []int32{node}, Err: kerr.RequestTimedOut, Count: -1})
				return h.Hits, h.Remove
			},
			repeats: true,
		},
		{
			name: "broker leaves the cluster",
			outage: func(t *testing.T, c *kafkatest.Cluster, node int32) (func() int, func()) {
				// Count the writes the departed broker turns away.
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Nodes: []int32{node}, Observe: true, Count: -1})
				if err := c.RemoveNode(node); err != nil {
					t.Fatal(err)
				}
				return h.Hits, h.Remove
			},
			mayMiss: true,
			repeats: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t)
			s := newKafkaSink(t, c, "BRIDGE_KAFKA_PARTITIONS", fmt.Sprint(partitions))
			st := startPipeline(t, s)
			want := map[string][]int{}
			rv := 0
			feed := func(rounds int) {
				for range rounds {
					for i := range objects {
						rv++
						name := fmt.Sprintf("cm-%03d", i)
						typ := source.Updated
						if len(want["ns/"+name]) == 0 {
							typ = source.Added
						}
						st.OnDelta(delta(name, rv, typ))
						want["ns/"+name] = append(want["ns/"+name], rv)
					}
				}
			}

			feed(2)
			st.drain(t, time.Minute)
			hits, end := tt.outage(t, c, c.LeaderFor("kube.configmaps", 0))
			feed(2) // during the outage
			fed := len(want) * 4
			poll.Until(t, time.Minute, func() (bool, string) {
				return hits() >= 10 || (tt.mayMiss && st.acks.count() == fed),
					fmt.Sprintf("the outage was never felt: %d writes turned away, %d of %d deltas acknowledged", hits(), st.acks.count(), fed)
			})
			t.Logf("the broker turned away %d writes", hits())
			feed(2) // still during the outage
			start := time.Now()
			end()
			st.drain(t, 2*time.Minute)
			t.Logf("recovered in %s; pipeline %+v", time.Since(start).Round(time.Millisecond), st.Stats())
			feed(1) // after the outage
			st.drain(t, time.Minute)

			total := 0
			for _, rvs := range want {
				total += len(rvs)
			}
			if n := st.acks.count(); n != total {
				t.Errorf("%d deltas acknowledged, want %d", n, total)
			}
			h := histories(t, c.ReadAll("kube.configmaps"))
			for _, p := range h.problems {
				t.Error(p)
			}
			repeated := 0
			for key, rvs := range want {
				got := h.rvs[key]
				unique := slices.Compact(slices.Clone(got))
				repeated += len(got) - len(unique)
				switch {
				case !slices.Equal(unique, rvs):
					t.Errorf("%s: log has resourceVersions %v, want %v in this order", key, got, rvs)
				case !tt.repeats && len(got) != len(rvs):
					t.Errorf("%s: log has resourceVersions %v, want each once: %v", key, got, rvs)
				}
			}
			t.Logf("%d deltas of %d objects, %d repeated right after themselves", total, objects, repeated)
		})
	}
}

var configmapResource = source.Resource{GroupVersionResource: configMaps.gvr, Kind: "ConfigMap", Namespaced: true}

// delta is a change of configmap ns/name at rv.
func delta(name string, rv int, typ source.DeltaType) source.Delta {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"rv": strconv.Itoa(rv)}}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetResourceVersion(strconv.Itoa(rv))
	return source.Delta{
		Type: typ, Resource: configmapResource, Namespace: "ns", Name: name,
		UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(rv),
		Observed: time.Now(), Object: u,
	}
}

// acks records what the pipeline acknowledged, as the checkpoint would.
type acks struct {
	mu   sync.Mutex
	recs map[string]int // "key@rv" -> times acknowledged
}

func (a *acks) Record(recs ...checkpoint.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs == nil {
		a.recs = map[string]int{}
	}
	for _, r := range recs {
		a.recs[r.Key+"@"+r.ResourceVersion]++
	}
}

func (a *acks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.recs)
}

// stream is the bridge's real pipeline publishing to a sink.
type stream struct {
	*pipeline.Pipeline
	acks *acks
}

// startPipeline runs a pipeline into s until the test ends.
func startPipeline(t *testing.T, s sink.Sink) *stream {
	t.Helper()
	a := &acks{}
	p := pipeline.New(s, event.Encoder{Cluster: "test"}, a, pipeline.Options{
		MaxPendingPerObject: 1000, // every delta is published: nothing collapses
		MaxRetryInterval:    time.Second,
	}, slog.New(slog.NewTextHandler(t.Output(), nil)).With("component", "pipeline"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &stream{Pipeline: p, acks: a}
}

// drain waits until everything queued is published.
func (st *stream) drain(t *testing.T, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := st.Drain(ctx); err != nil {
		t.Fatalf("drain: %v (stats %+v)", err, st.Stats())
	}
}

// groupRead reads topics in a consumer group until it has n records.
func groupRead(t *testing.T, c *kafkatest.Cluster, group string, n int, topics ...string) []*kgo.Record {
	t.Helper()
	cl := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer group %s: %d of %d records: %v", group, len(out), n, ctx.Err())
		}
		fetches.EachError(func(topic string, p int32, err error) { t.Fatalf("consume %s[%d]: %v", topic, p, err) })
		out = append(out, fetches.Records()...)
	}
	return out
}

// history is what a topic holds about each object, in log order.
type history struct {
	rvs       map[string][]int       // key -> resourceVersions of its events
	partition map[string]int32       // key -> the partition its records are in
	problems  []string               // records of one key in two partitions
	tombs     map[string]int         // key -> tombstones
	last      map[string]*kgo.Record // key -> its latest record
}

// histories groups records (in log order per partition) by key.
func histories(t *testing.T, recs []*kgo.Record) history {
	t.Helper()
	h := history{rvs: map[string][]int{}, partition: map[string]int32{}, tombs: map[string]int{}, last: map[string]*kgo.Record{}}
	for _, r := range recs {
		key := string(r.Key)
		if p, ok := h.partition[key]; ok && p != r.Partition {
			h.problems = append(h.problems, fmt.Sprintf("%s in partitions %d and %d", key, p, r.Partition))
		}
		h.partition[key] = r.Partition
		h.last[key] = r
		m, _ := decodeRecord(t, r)
		if m == nil {
			h.tombs[key]++
			continue
		}
		rv, err := strconv.Atoi(m.ResourceVersion)
		if err != nil {
			t.Fatalf("%s: resourceVersion %q", key, m.ResourceVersion)
		}
		h.rvs[key] = append(h.rvs[key], rv)
	}
	return h
}

// newKafkaSink starts a Kafka sink of ConfigMaps on c's brokers, with the
// bridge's defaults and vars on top, that the end of t closes.
func newKafkaSink(t *testing.T, c *kafkatest.Cluster, vars ...string) *kafkasink.Sink {
	t.Helper()
	environ := []string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=kafka", "BRIDGE_KAFKA_BROKERS=" + strings.Join(c.Addrs(), ",")}
	for i := 0; i+1 < len(vars); i += 2 {
		environ = append(environ, vars[i]+"="+vars[i+1])
	}
	cfg, err := config.Load(environ)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := kafkasink.New(ctx, cfg.KafkaSettings(), []schema.GroupVersionResource{configMaps.gvr}, kafkasink.Options{}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatalf("kafka sink: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}
