package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// Records handed over with a context that ended already are not sent.
func TestProduceWithEndedContextSendsNothing(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, nil), configmaps)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 20 {
		errs := s.p.produce(ctx, []*kafkago.Message{{Topic: "kube.configmaps", Key: []byte(fmt.Sprint("ns/", i)), Value: []byte(`{}`)}})
		if !errors.Is(errs[0], context.Canceled) {
			t.Errorf("record %d: %v, want its context's end", i, errs[0])
		}
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(c.ReadAll("kube.configmaps")); got != 0 {
		t.Errorf("topic holds %d records, want none", got)
	}
}

// A delete whose event was acknowledged as its context ended gets no
// tombstone in that round, and fails, to be sent again.
func TestTombstoneNotWrittenOnceContextEnds(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}), configmaps)
	const deletes = 10
	for i := range deletes {
		ctx, cancel := context.WithCancel(t.Context())
		// The sink reads the health clock once the event is acknowledged:
		// the context ends then, before the tombstone.
		s.health.now = func() time.Time { cancel(); return time.Now() }
		err := s.Publish(ctx, []*wire.Message{message(configmaps, "ns", fmt.Sprint("cm-", i), "deleted", i+1)})
		cancel()
		if err := sink.PerMessage(err, 1)[0]; err == nil || sink.IsTerminal(err) || !errors.Is(err, context.Canceled) {
			t.Errorf("delete %d: %v, want its context's end, to retry", i, err)
		}
	}
	s.health.now = nil
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	events, tombstones := 0, 0
	for _, r := range c.ReadAll("kube.configmaps") {
		if r.Value == nil {
			tombstones++
		} else {
			events++
		}
	}
	if events != deletes || tombstones != 0 {
		t.Errorf("topic holds %d events and %d tombstones, want %d events and no tombstone", events, tombstones, deletes)
	}
}

// A record whose caller stopped waiting while its request was in flight
// keeps the later records of its key from going until that request is
// answered, so that they land after it; records of other keys go.
func TestLaterRecordWaitsForAbandonedOne(t *testing.T) {
	for _, alone := range []bool{false, true} {
		t.Run(fmt.Sprintf("alone=%t", alone), func(t *testing.T) {
			c := kafkatest.Start(t)
			s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}), configmaps)
			h := holdProduce(t, c, func(n int64) bool { return n == 1 }, nil)
			rec := func(key, value string) []*kafkago.Message {
				return []*kafkago.Message{{Topic: "kube.configmaps", Key: []byte(key), Value: []byte(value)}}
			}
			first := s.p.produce
			if alone {
				first = s.p.produceAlone
			}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan []error, 1)
			go func() { done <- first(ctx, rec("ns/k", "1")) }()
			h.waitRequests(t, 1)
			cancel()
			if _, ok := within(t, done, 5*time.Second, "the first call, whose context ended"); !ok {
				h.free()
				<-done
				return
			}

			later := make(chan []error, 1)
			go func() { later <- s.p.produce(t.Context(), rec("ns/k", "2")) }()
			for deadline := time.Now().Add(time.Minute); s.p.queued() == 0 && h.requests.Load() < 2; {
				if time.Now().After(deadline) {
					t.Fatal("the later record was neither queued nor sent")
				}
				time.Sleep(time.Millisecond)
			}
			if errs := s.p.produce(t.Context(), rec("ns/other", "1")); errs[0] != nil {
				t.Fatalf("a record of another key: %v", errs[0])
			}
			var errs []error
			answered := false
			select {
			case errs = <-later:
				answered = true
				t.Errorf("the later record of ns/k was answered (%v) while the broker held the earlier one", errs[0])
			default:
			}
			h.free()
			if !answered {
				errs, answered = within(t, later, 30*time.Second, "the later record")
			}
			if answered && errs[0] != nil {
				t.Errorf("the later record: %v", errs[0])
			}
			var got []string
			for _, r := range c.ReadAll("kube.configmaps") {
				if string(r.Key) == "ns/k" {
					got = append(got, string(r.Value))
				}
			}
			if fmt.Sprint(got) != "[1 2]" {
				t.Errorf("ns/k holds %v, want [1 2]", got)
			}
		})
	}
}

// A discovery document whose write gave up while the broker held it, then
// a newer one: the newer lands last, and is the one the topic gives back.
func TestDiscoveryWriteCutThenNewer(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, nil), configmaps)
	h := holdProduce(t, c, func(n int64) bool { return n == 1 }, nil)
	doc := func(n int) wire.Discovery {
		d := wire.Discovery{Cluster: "c", Resources: []wire.DiscoveredResource{}}
		for i := range n {
			d.Resources = append(d.Resources, wire.DiscoveredResource{Version: "v1", Resource: fmt.Sprint("r", i), Kind: "R", Singular: "r"})
		}
		return d
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.WriteDiscovery(ctx, doc(1)) }()
	h.waitRequests(t, 1)
	cancel()
	if err, ok := within(t, done, 5*time.Second, "the write whose context ended"); ok && err == nil {
		t.Fatal("the write whose context ended succeeded")
	}

	newer := make(chan error, 1)
	go func() { newer <- s.WriteDiscovery(t.Context(), doc(2)) }()
	for deadline := time.Now().Add(time.Minute); s.p.queued() == 0 && h.requests.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the newer document was neither queued nor sent")
		}
		time.Sleep(time.Millisecond)
	}
	// A record of another cluster, queued behind the newer document, is
	// acknowledged while the broker holds the older one.
	other := []*kafkago.Message{{Topic: s.discoveryTopic(), Key: []byte("other"), Value: []byte(`{}`)}}
	if errs := s.p.produce(t.Context(), other); errs[0] != nil {
		t.Fatalf("a document of another cluster: %v", errs[0])
	}
	h.free()
	if err, ok := within(t, newer, 30*time.Second, "the newer write"); ok && err != nil {
		t.Fatalf("the newer write: %v", err)
	}
	d, ok, err := s.LastDiscovery(t.Context(), "c")
	if err != nil || !ok || len(d.Resources) != 2 {
		t.Errorf("the topic gives back %d resources (found %t, %v), want the newer document's 2", len(d.Resources), ok, err)
	}
}
