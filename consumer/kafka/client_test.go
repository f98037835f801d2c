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
