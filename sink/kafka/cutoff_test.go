package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// produceHold makes a cluster's brokers hold the produce requests a
// predicate picks until release, and counts the produce requests.
type produceHold struct {
	requests atomic.Int64
	release  chan struct{}
	once     sync.Once
}

// holdProduce installs on c a control that answers produce request n
// with answer (nil: the broker's own answer) after holding it until
// release when hold(n); the end of t releases every request held.
func holdProduce(t *testing.T, c *kafkatest.Cluster, hold func(n int64) bool, answer func(n int64, req kmsg.Request) kmsg.Response) *produceHold {
	h := &produceHold{release: make(chan struct{})}
	c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n := h.requests.Add(1)
		if hold != nil && hold(n) {
			c.SleepControl(func() { <-h.release })
		}
		if answer != nil {
			if res := answer(n, req); res != nil {
				return res, nil, true
			}
		}
		return nil, nil, false
	})
	t.Cleanup(h.free)
	return h
}

// free releases the requests held, and those to come.
func (h *produceHold) free() { h.once.Do(func() { close(h.release) }) }

// waitRequests waits until the brokers got at least n produce requests.
func (h *produceHold) waitRequests(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); h.requests.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the brokers got %d produce requests in a minute, want %d", h.requests.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// tooLarge answers a produce request with MESSAGE_TOO_LARGE for each of
// its partitions.
func tooLarge(req kmsg.Request) kmsg.Response {
	pr := req.(*kmsg.ProduceRequest)
	res := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range pr.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.MessageTooLarge.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		res.Topics = append(res.Topics, rt)
	}
	return res
}

// busy is how many requests p counts in flight.
func (p *producer) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

// within waits up to d for ch, failing t with what when it does not come.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) (T, bool) {
	t.Helper()
	select {
	case v := <-ch:
		return v, true
	case <-time.After(d):
		t.Errorf("%s still running after %s", what, d)
		var zero T
		return zero, false
	}
}

// A Publish whose records the broker refused as too large sends them
// again one by one; once its context ends it sends no more of them, and
// returns while the broker still holds the one in flight, with an error
// to retry for each message.
func TestWriteAloneStopsAtContextEnd(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}), configmaps)
	// The first request (every message) is refused as too large; the
	// brokers hold the ones that follow (a message alone).
	h := holdProduce(t, c, func(n int64) bool { return n > 1 }, func(n int64, req kmsg.Request) kmsg.Response {
		if n == 1 {
			return tooLarge(req)
		}
		return nil
	})
	var msgs []*wire.Message
	for i := range 4 {
		msgs = append(msgs, message(configmaps, "ns", fmt.Sprint("cm-", i), "added", i+1))
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Publish(ctx, msgs) }()
	h.waitRequests(t, 2)
	cancel()
	err, ok := within(t, done, 5*time.Second, "Publish whose context ended")
	h.free()
	if !ok {
		err = <-done
	}
	for i, err := range sink.PerMessage(err, len(msgs)) {
		if err == nil || sink.IsTerminal(err) || !errors.Is(err, context.Canceled) {
			t.Errorf("message %d: %v, want its context's end, to retry", i, err)
		}
	}
	if n := h.requests.Load(); n != 2 {
		t.Errorf("the brokers got %d produce requests, want 2: the batch and the first message alone", n)
	}
}

// A record sent alone whose caller stopped waiting is still in flight:
// close waits for it; after close, no record goes alone.
func TestCloseWaitsForRecordSentAlone(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}), configmaps)
	h := holdProduce(t, c, func(int64) bool { return true }, nil)
	rec := func(key string) []*kafkago.Message {
		return []*kafkago.Message{{Topic: "kube.configmaps", Key: []byte(key), Value: []byte(`{}`)}}
	}

	// The caller gives up before its deadline: the request, already
	// written, goes on.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan []error, 1)
	go func() { done <- s.p.produceAlone(ctx, rec("ns/a")) }()
	h.waitRequests(t, 1)
	cancel()
	errs, ok := within(t, done, 5*time.Second, "produceAlone whose context ended")
	if !ok {
		h.free()
		errs = <-done
	}
	if !errors.Is(errs[0], context.Canceled) {
		t.Errorf("produceAlone whose context ended: %v, want its context's end", errs[0])
	}

	cctx, ccancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer ccancel()
	if err := s.p.close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close while the broker holds a record sent alone: %v, want it to wait until its deadline", err)
	}
	h.free()
	for deadline := time.Now().Add(time.Minute); s.p.inFlight() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the request of the record sent alone never ended")
		}
		time.Sleep(time.Millisecond)
	}
	if errs := s.p.produceAlone(t.Context(), rec("ns/b")); !errors.Is(errs[0], errProducerClosed) {
		t.Errorf("produceAlone after close: %v, want %v", errs[0], errProducerClosed)
	}
	if n := h.requests.Load(); n != 1 {
		t.Errorf("the brokers got %d produce requests, want 1: none after close", n)
	}
}
