package kafka

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/kafkatest"
)

var configmapResource = source.Resource{GroupVersionResource: configmaps, Kind: "ConfigMap", Namespaced: true}

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
	}, testLogger(t).With("component", "pipeline"))
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
		m := decode(t, r)
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
