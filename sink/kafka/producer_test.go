package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// A lone change is acknowledged without waiting for a batch that never
// fills: with BRIDGE_KAFKA_BATCH_TIMEOUT at 10 s, Publish returns well
// within it.
func TestLoneMessageNotDelayed(t *testing.T) {
	c := kafkatest.Start(t)
	const batchTimeout = 10 * time.Second
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_BATCH_TIMEOUT": batchTimeout.String()}), configmaps)
	ctx, cancel := context.WithTimeout(t.Context(), 2*batchTimeout)
	defer cancel()
	for rv := 1; rv <= 3; rv++ {
		began := time.Now()
		if err := s.Publish(ctx, []*wire.Message{message(configmaps, "ns", "a", "updated", rv)}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took >= batchTimeout/2 {
			t.Fatalf("change %d took %s to be acknowledged, with BRIDGE_KAFKA_BATCH_TIMEOUT=%s", rv, took, batchTimeout)
		}
	}
	if got := len(c.ReadAll("kube.configmaps")); got != 3 {
		t.Errorf("topic holds %d records, want 3", got)
	}
}

// Changes published together from many goroutines share produce requests:
// those that come while a request is in flight go together in the next
// one. Each record lands in the partition wire.PartitionFor names.
func TestConcurrentMessagesShareRequests(t *testing.T) {
	c := kafkatest.Start(t)
	const partitions = 6
	// Records wait behind a request in flight for as long as it takes
	// (BRIDGE_KAFKA_BATCH_TIMEOUT): on a slow machine, goroutines that
	// start late would otherwise see the records before them leave in
	// requests of their own, which the held brokers do not answer, and
	// never reach the queue the brokers wait for.
	s := newSink(t, clusterConfig(t, c, map[string]string{
		"BRIDGE_KAFKA_PARTITIONS":    fmt.Sprint(partitions),
		"BRIDGE_KAFKA_BATCH_TIMEOUT": "1m",
	}), configmaps)

	// The brokers hold their first produce request until the first change
	// of every goroutine is handed over: all but those in flight (one per
	// broker at most) then wait in the sink's queues.
	const goroutines, each = 50, 4
	var requests atomic.Int64
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if requests.Add(1) == 1 {
			for deadline := time.Now().Add(time.Minute); s.p.queued() < goroutines-kafkatest.Brokers && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		return nil, nil, false
	})

	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				m := message(configmaps, "ns", fmt.Sprintf("cm-%d-%d", g, i), "added", g*each+i+1)
				errs <- s.Publish(t.Context(), []*wire.Message{m})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	recs := c.ReadAll("kube.configmaps")
	if len(recs) != goroutines*each {
		t.Fatalf("topic holds %d records, want %d", len(recs), goroutines*each)
	}
	for _, r := range recs {
		if want := int32(wire.PartitionFor(r.Key, partitions)); r.Partition != want {
			t.Errorf("%s in partition %d, PartitionFor says %d", r.Key, r.Partition, want)
		}
	}
	// Each goroutine's changes go one after the other, so at least each
	// times as many requests as brokers may be needed; one request per
	// change is what sharing avoids.
	if n := requests.Load(); n > goroutines*each/4 {
		t.Errorf("%d changes went in %d produce requests, want them to share requests", goroutines*each, n)
	}
	t.Logf("%d changes in %d produce requests", goroutines*each, requests.Load())
}

// queued is how many records wait in p's queues.
func (p *producer) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.brokers {
		n += len(b.queue)
	}
	return n
}

// Records wait behind a produce request in flight to their broker for at
// most BRIDGE_KAFKA_BATCH_TIMEOUT: then another request takes them, while
// the first is still unanswered.
func TestBatchTimeoutBoundsWaitBehindRequest(t *testing.T) {
	c := kafkatest.Start(t)
	const batchTimeout = 200 * time.Millisecond
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1", "BRIDGE_KAFKA_BATCH_TIMEOUT": batchTimeout.String()}), configmaps)

	// The broker holds the first produce request until release.
	var (
		requests atomic.Int64
		release  = make(chan struct{})
	)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if requests.Add(1) == 1 {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	first := make(chan error, 1)
	go func() { first <- s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "a", "added", 1)}) }()
	for deadline := time.Now().Add(time.Minute); requests.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first change never reached the broker")
		}
		time.Sleep(time.Millisecond)
	}

	began := time.Now()
	if err := s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "b", "added", 2)}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < batchTimeout {
		t.Errorf("the second change was acknowledged after %s, before it waited BRIDGE_KAFKA_BATCH_TIMEOUT (%s) behind the first", took, batchTimeout)
	}
	select {
	case err := <-first:
		t.Fatalf("the first change was answered (%v) while the broker held it", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := len(c.ReadAll("kube.configmaps")); got != 2 {
		t.Errorf("topic holds %d records, want 2", got)
	}
}

// A change whose Publish gave up (its context ended) while it waited
// behind a request in flight is never sent: a retry cannot find an older
// copy of it arriving after the new one.
func TestAbandonedChangeNotSent(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1", "BRIDGE_KAFKA_BATCH_TIMEOUT": "1m"}), configmaps)
	var (
		requests atomic.Int64
		release  = make(chan struct{})
	)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if requests.Add(1) == 1 {
			c.SleepControl(func() { <-release })
		}
		c.KeepControl()
		return nil, nil, false
	})
	first := make(chan error, 1)
	go func() { first <- s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "a", "added", 1)}) }()
	for deadline := time.Now().Add(time.Minute); requests.Load() == 0; {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the first change never reached the broker")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	err := s.Publish(ctx, []*wire.Message{message(configmaps, "ns", "b", "added", 2)})
	cancel()
	close(release)
	if err := sink.PerMessage(err, 1)[0]; err == nil || sink.IsTerminal(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish whose context ended: %v, want its deadline, to retry", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The queue is FIFO: had ns/b stayed in it, it would go before ns/c.
	if err := s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "c", "added", 3)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range c.ReadAll("kube.configmaps") {
		got = append(got, string(r.Key))
	}
	if fmt.Sprint(got) != "[ns/a ns/c]" {
		t.Errorf("topic holds %v, want [ns/a ns/c]", got)
	}
}
