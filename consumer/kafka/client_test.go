package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
)

// A client that consumes as a group member, with group settings (offsets
// committed by hand, a revoke callback), serves a Log as any other: its
// consumer settings are replaced in the Log's own clients.
func TestLogFromGroupConsumerClient(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.put("a", 1)
	cl := e.c.Client(
		kgo.ConsumerGroup("the-callers-group"),
		kgo.ConsumeTopics("the-callers-topic"),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) {}),
	)
	log, err := NewLog(cl, Config{}, consumer.Options{Resource: configmaps})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	pos, err := log.ReadState(ctx, func(r consumer.Record) error {
		got = append(got, r.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadState with a group consumer's client: %v", err)
	}
	if len(got) != 1 || got[0] != "default/a" {
		t.Fatalf("ReadState passed %v, want default/a", got)
	}
	stop := errors.New("caught up")
	if err := log.Follow(ctx, pos, func(r consumer.Record) error {
		if r.Progress() {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("Follow with a group consumer's client: %v", err)
	}
}

// An error of fn on a progress record is returned as it is, at once, also
// when the progress comes from a check that found the partition's tail
// holds nothing to give (here a transaction marker).
func TestFollowReturnsErrorOfProgress(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.putInTransaction("in-txn", 1)
	recs, _ := e.readState()
	from := recs[0].Position // before the commit marker
	stop := errors.New("caught up")
	calls := 0
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.log.Follow(ctx, from, func(r consumer.Record) error {
		calls++
		if r.Progress() {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Follow returned %v after %d calls of fn in %s; want fn's error after its first call", err, calls, time.Since(start).Round(time.Millisecond))
	}
}
