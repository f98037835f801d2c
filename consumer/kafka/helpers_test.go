package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

func TestMain(m *testing.M) {
	// Shorter than in production, so that tests of progress records and
	// expiry finish in seconds.
	checkEvery = 500 * time.Millisecond
	pollWait = 200 * time.Millisecond
	os.Exit(m.Run())
}

var configmaps = schema.GroupResource{Resource: "configmaps"}

// env is a kfake cluster, a topic and a Log of it.
type env struct {
	t       *testing.T
	c       *kafkatest.Cluster
	topic   string
	log     *Log
	produce *kgo.Client
}

// newEnv starts a cluster with a state topic of the given partitions
// (compacted, kept forever) and extra configs, and a Log of configmaps in
// it.
func newEnv(t *testing.T, partitions int32, configs map[string]string) *env {
	t.Helper()
	c := kafkatest.Start(t)
	cfg := map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}
	for k, v := range configs {
		cfg[k] = v
	}
	topic := "kube.configmaps"
	c.CreateTopic(topic, partitions, cfg)
	log, err := NewLog(c.Client(), Config{}, consumer.Options{Cluster: "c1", Resource: configmaps})
	if err != nil {
		t.Fatal(err)
	}
	if log.Topic() != topic {
		t.Fatalf("Log reads topic %q, want %q", log.Topic(), topic)
	}
	return &env{t: t, c: c, topic: topic, log: log, produce: c.Client(kgo.DefaultProduceTopic(topic))}
}

// message is the bridge's event for version rv of configmap default/name.
func message(name string, rv int) *wire.Message {
	return &wire.Message{
		ID:              fmt.Sprintf("uid-%s-%d", name, rv),
		Source:          "/clusters/c1/api/v1/configmaps",
		Type:            "io.kubebus.configmaps.updated",
		Subject:         "default/" + name,
		Time:            time.Now(),
		Action:          "updated",
		Resource:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		ResourceVersion: strconv.Itoa(rv),
		UID:             "uid-" + name,
		Kind:            "ConfigMap",
		APIVersion:      "v1",
		Namespace:       "default",
		Name:            name,
		Cluster:         "c1",
		Data:            []byte(`{"object":{}}`),
	}
}

// record is the Kafka record the bridge writes for m under key, in
// structured mode; m nil is a tombstone.
func record(key string, m *wire.Message) *kgo.Record {
	r := &kgo.Record{Key: []byte(key)}
	if m == nil {
		return r
	}
	v, err := m.MarshalJSON()
	if err != nil {
		panic(err)
	}
	r.Value = v
	r.Headers = []kgo.RecordHeader{
		{Key: wire.Kafka.ContentTypeHeader(), Value: []byte(wire.KafkaStructuredContentType)},
		{Key: wire.Kafka.HeaderOf("id"), Value: []byte(m.ID)},
	}
	return r
}

// put writes version rv of configmap default/name, in a batch of its own.
func (e *env) put(name string, rv int) {
	e.t.Helper()
	e.send(record("default/"+name, message(name, rv)))
}

// del writes the tombstone of configmap default/name.
func (e *env) del(name string) {
	e.t.Helper()
	e.send(record("default/"+name, nil))
}

// putInTransaction writes the configmap default/name at resourceVersion
// rv in a committed transaction: the partition then holds the record and,
// after it, the commit marker, an offset no consumer is given.
func (e *env) putInTransaction(name string, rv int) {
	e.t.Helper()
	txn := e.c.Client(kgo.TransactionalID("tx"), kgo.DefaultProduceTopic(e.topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := txn.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, record("default/"+name, message(name, rv))).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) send(r *kgo.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.produce.ProduceSync(ctx, r).FirstErr(); err != nil {
		e.t.Fatalf("produce %s: %v", r.Key, err)
	}
}

// readState runs ReadState with a deadline and returns its records.
func (e *env) readState() ([]consumer.Record, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []consumer.Record
	pos, err := e.log.ReadState(ctx, func(r consumer.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		e.t.Fatalf("ReadState: %v", err)
	}
	return recs, pos
}

// follower runs a Follow in the background and keeps what it passes on.
type background struct {
	mu     sync.Mutex
	recs   []consumer.Record
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

func (e *env) follow(from string) *background {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &background{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(f.done)
		err := e.log.Follow(ctx, from, func(r consumer.Record) error {
			f.mu.Lock()
			f.recs = append(f.recs, r)
			f.mu.Unlock()
			return nil
		})
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}()
	e.t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// records returns a copy of what the Follow passed on so far.
func (f *background) records() []consumer.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]consumer.Record(nil), f.recs...)
}

// stop ends the Follow and returns its error (nil when it ended by the
// cancel).
func (f *background) stop() error {
	f.cancel()
	<-f.done
	if errors.Is(f.err, context.Canceled) {
		return nil
	}
	return f.err
}

// waitFor polls cond until it holds, failing the test after a while, or
// at once if the Follow ends with an error.
func waitFor(t *testing.T, f *background, what string, cond func([]consumer.Record) bool) []consumer.Record {
	t.Helper()
	var recs []consumer.Record
	poll.Until(t, 30*time.Second, func() (bool, string) {
		recs = f.records()
		if cond(recs) {
			return true, ""
		}
		select {
		case <-f.done:
			t.Fatalf("waiting for %s: Follow ended: %v (%d records)", what, f.err, len(recs))
		default:
		}
		return false, fmt.Sprintf("waiting for %s: %d records", what, len(recs))
	})
	return recs
}

// followErr runs a Follow that must end by itself, and returns its error.
func (e *env) followErr(from string) error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.log.Follow(ctx, from, func(consumer.Record) error { return nil })
	if errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("Follow(%q) did not end", from)
	}
	return err
}

// ids are the event IDs of the records with a message.
func ids(recs []consumer.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Message != nil {
			out = append(out, r.Message.ID)
		}
	}
	return out
}

// progressCount counts progress records.
func progressCount(recs []consumer.Record) int {
	n := 0
	for _, r := range recs {
		if r.Progress() {
			n++
		}
	}
	return n
}

// ended waits for the Follow to end by itself and returns its error.
func ended(t *testing.T, f *background) error {
	t.Helper()
	select {
	case <-f.done:
		return f.err
	case <-time.After(30 * time.Second):
		t.Fatal("the Follow did not end")
		return nil
	}
}
