package kafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// discoveryEnv is a cluster with the topic kube._discovery of the given
// partitions, a DiscoveryLog of it and a producer that writes to the
// partition a record names.
type discoveryEnv struct {
	t       *testing.T
	c       *kafkatest.Cluster
	dl      *DiscoveryLog
	produce *kgo.Client
}

func newDiscoveryEnv(t *testing.T, partitions int32) *discoveryEnv {
	t.Helper()
	c := kafkatest.Start(t)
	topic := wire.DiscoveryTopic("kube")
	c.CreateTopic(topic, partitions, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"})
	dl, err := NewDiscoveryLog(c.Client(), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &discoveryEnv{t: t, c: c, dl: dl}
	e.newProducer()
	return e
}

// newProducer makes the producer afresh, to see partitions added.
func (e *discoveryEnv) newProducer() {
	e.produce = e.c.Client(kgo.DefaultProduceTopic(wire.DiscoveryTopic("kube")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

func (e *discoveryEnv) put(partition int32, key string, d wire.Discovery) {
	e.t.Helper()
	data, err := wire.MarshalDiscovery(d)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &kgo.Record{Key: []byte(key), Value: data, Partition: partition,
		Headers: []kgo.RecordHeader{{Key: wire.Kafka.ContentTypeHeader(), Value: []byte(wire.DiscoveryContentType)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.produce.ProduceSync(ctx, r).FirstErr(); err != nil {
		e.t.Fatalf("produce %s: %v", key, err)
	}
}

// docs follows the log until the test ends.
type docs struct {
	mu  sync.Mutex
	got []wire.Discovery
}

func (e *discoveryEnv) follow() *docs {
	d := &docs{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.dl.Follow(ctx, func(doc wire.Discovery) error {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.got = append(d.got, doc)
			return nil
		})
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return d
}

func (d *docs) servers() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, doc := range d.got {
		out = append(out, doc.Server)
	}
	return out
}

// A document whose cluster is not its key is skipped and counted: one
// keyed b claiming cluster a is not passed on as a's.
func TestDiscoveryLogSkipsDocumentOfAnotherKey(t *testing.T) {
	e := newDiscoveryEnv(t, 1)
	e.put(0, "b", wire.Discovery{Cluster: "a", Server: "forged"})
	e.put(0, "a", wire.Discovery{Cluster: "a", Server: "a's"})
	d := e.follow()
	e.put(0, "c", wire.Discovery{Cluster: "a", Server: "forged"})
	e.put(0, "c", wire.Discovery{Cluster: "c", Server: "c's"})
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return len(d.servers()) >= 2 && e.dl.Skipped() >= 2, "documents of a and c, and two skipped"
	})
	for _, s := range d.servers() {
		if s == "forged" {
			t.Errorf("passed on a document keyed by another cluster")
		}
	}
	if n, s := len(d.servers()), e.dl.Skipped(); n != 2 || s != 2 {
		t.Errorf("%d documents passed on and %d skipped, want 2 and 2", n, s)
	}
}

// The bridge creates the topic with one partition; a topic with more, or
// given more while a reader follows it, is read whole.
func TestDiscoveryLogReadsPartitionsAdded(t *testing.T) {
	e := newDiscoveryEnv(t, 1)
	e.put(0, "a", wire.Discovery{Cluster: "a", Server: "a's"})
	d := e.follow()
	poll.Until(t, 10*time.Second, func() (bool, string) { return len(d.servers()) == 1, "the document of a" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.c.Admin().CreatePartitions(ctx, 1, wire.DiscoveryTopic("kube")); err != nil {
		t.Fatal(err)
	}
	e.newProducer()
	e.put(1, "b", wire.Discovery{Cluster: "b", Server: "b's"})
	poll.Until(t, 20*time.Second, func() (bool, string) {
		for _, s := range d.servers() {
			if s == "b's" {
				return true, ""
			}
		}
		return false, "the document of b, on the partition added"
	})
}
