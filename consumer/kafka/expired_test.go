package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
)

func wantExpired(t *testing.T, err error, why string) {
	t.Helper()
	if !errors.Is(err, consumer.ErrExpired) {
		t.Fatalf("Follow: %v, want ErrExpired", err)
	}
	if !strings.Contains(err.Error(), why) {
		t.Fatalf("Follow: %v, want it to say %q", err, why)
	}
}

// Positions that are not positions of the topic are expired.
func TestFollowMalformedPosition(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.put("a", 1)
	_, pos := e.readState()
	p, _ := parsePosition(pos)
	for _, tc := range []struct{ from, why string }{
		{"", "not a kafka position"},
		{"12345", "not a kafka position"},
		{"n1.abc.1.2", "not a kafka position"},
		{"k1.xyz.1.0.0", "topic id"},
		{"k1." + p.topicID + ".x.0.0", "time"},
		{"k1." + p.topicID + ".1.0.-1", "offset"},
		{"k1." + p.topicID + "." + time.Now().Format("20060102") + ".0", "has 2 partitions, the position 1"},
		{"k1." + p.topicID + ".1", "not a kafka position"},
		{"k1." + p.topicID + "." + strings.Split(pos, ".")[2] + ".100.100", "not a position of this topic"},
	} {
		t.Run(tc.from, func(t *testing.T) { wantExpired(t, e.followErr(tc.from), tc.why) })
	}
}

// A position below a partition's log start is expired.
func TestFollowBelowLogStart(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.put("a", 1)
	e.put("b", 1)
	_, old := e.readState()
	e.put("c", 1)
	e.put("d", 1)
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: e.topic, Partition: 0, At: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.c.Admin().DeleteRecords(ctx, o)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	wantExpired(t, e.followErr(old), "starts at offset 3, after the position's 2")
}

// A position of a deleted and recreated topic is expired, even when the
// new topic has as many partitions and records.
func TestFollowRecreatedTopic(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.put("a", 1)
	_, pos := e.readState()
	f := e.follow(pos)
	waitFor(t, f, "a progress record", func(r []consumer.Record) bool { return progressCount(r) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.c.Admin().DeleteTopic(ctx, e.topic); err != nil {
		t.Fatal(err)
	}
	e.c.CreateTopic(e.topic, 2, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"})
	e.produce = e.c.Client(kgo.DefaultProduceTopic(e.topic)) // the old one knows the old topic ID
	e.put("a", 1)
	if err := ended(t, f); !errors.Is(err, consumer.ErrExpired) {
		t.Fatalf("Follow during the recreation ended with %v, want ErrExpired", err)
	}
	wantExpired(t, e.followErr(pos), "recreated")
}

// A position older than 90% of delete.retention.ms is expired: a
// tombstone after it may be gone. A Follow that keeps up refreshes its
// positions' time and so never expires.
func TestFollowOlderThanDeleteRetention(t *testing.T) {
	e := newEnv(t, 2, map[string]string{"delete.retention.ms": "3000"})
	e.put("a", 1)
	_, pos := e.readState()
	f := e.follow(pos)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := e.log.Follow(ctx, pos, func(consumer.Record) error { return nil })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("young position: %v, want the Follow to run until its context ends", err)
	}
	err = nil
	deadline := time.Now().Add(20 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = e.log.Follow(ctx, pos, func(consumer.Record) error { return nil })
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
	}
	wantExpired(t, err, "delete.retention.ms 3s")
	p, _ := parsePosition(pos)
	if age := time.Since(p.time); age < 2700*time.Millisecond {
		t.Fatalf("expired after %s, before 90%% of 3s", age)
	}
	recs := f.records()
	last := recs[len(recs)-1]
	if !last.Progress() {
		t.Fatalf("last record of the idle Follow is not a progress record: %+v", last)
	}
	if err := f.stop(); err != nil {
		t.Fatalf("the idle Follow ended with %v", err)
	}
	f = e.follow(last.Position)
	waitFor(t, f, "a progress record", func(r []consumer.Record) bool { return progressCount(r) > 0 })
}

// Added partitions make old positions expired, at once and during a
// Follow: keys may have moved between partitions.
func TestFollowPartitionsAdded(t *testing.T) {
	e := newEnv(t, 2, nil)
	_, pos := e.readState()
	f := e.follow(pos)
	waitFor(t, f, "a progress record", func(r []consumer.Record) bool { return progressCount(r) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.c.Admin().CreatePartitions(ctx, 1, e.topic); err != nil {
		t.Fatal(err)
	}
	wantExpired(t, ended(t, f), "from 2 to 3 partitions")
	wantExpired(t, e.followErr(pos), "has 3 partitions, the position 2")
}
