package kafkastore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/kafkatest"
)

func TestOpenTopic(t *testing.T) {
	c := kafkatest.Start(t)
	openErr := func(t *testing.T, vars map[string]string, topic string) error {
		t.Helper()
		s, err := openStore(t.Context(), t, config(t, c, vars), topic)
		if err == nil {
			s.Close()
		}
		return err
	}
	t.Run("created compacted, with one partition", func(t *testing.T) {
		topic := newTopic()
		open(t, config(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "6"}), topic)
		if got := c.Partitions(topic); got != 1 {
			t.Errorf("%d partitions, want 1", got)
		}
		if got := c.TopicConfig(topic, "cleanup.policy"); got != "compact" {
			t.Errorf("cleanup.policy %q, want compact", got)
		}
	})
	t.Run("missing without creation", func(t *testing.T) {
		topic := newTopic()
		err := openErr(t, map[string]string{"BRIDGE_KAFKA_CREATE_TOPICS": "false"}, topic)
		if err == nil || !strings.HasPrefix(err.Error(), "checkpoint: kafka: ") || !strings.Contains(err.Error(), "topic "+topic+" does not exist") {
			t.Errorf("Open: %v; want an error naming the missing topic", err)
		}
		if c.Partitions(topic) != 0 {
			t.Error("the topic was created anyway")
		}
	})
	t.Run("existing topic not compacted", func(t *testing.T) {
		topic := newTopic()
		c.CreateTopic(topic, 1, nil)
		if err := openErr(t, nil, topic); err == nil || !strings.Contains(err.Error(), "cleanup.policy=delete") {
			t.Errorf("Open: %v; want an error about cleanup.policy", err)
		}
	})
	t.Run("bad topic name", func(t *testing.T) {
		if err := openErr(t, nil, "no/slashes"); err == nil || !strings.Contains(err.Error(), "BRIDGE_CHECKPOINT") {
			t.Errorf("Open: %v; want an error naming BRIDGE_CHECKPOINT", err)
		}
	})
	t.Run("existing compacted topic with several partitions", func(t *testing.T) {
		topic := newTopic()
		c.CreateTopic(topic, 3, map[string]string{"cleanup.policy": "compact"})
		s := open(t, config(t, c, nil), topic)
		var recs []checkpoint.Record
		want := checkpoint.Snapshot{Objects: map[string]checkpoint.Position{}, LastResourceVersion: "100"}
		for i := range 100 {
			r := put("configmaps", fmt.Sprintf("ns/cm-%03d", i), "u", strconv.Itoa(i+1))
			recs = append(recs, r)
			want.Objects[r.Key] = r.Position
		}
		commit(t, s, recs...)
		partitions := map[int32]bool{}
		for _, r := range c.ReadAll(topic) {
			partitions[r.Partition] = true
		}
		if len(partitions) != 3 {
			t.Errorf("records in %d partitions, want all 3", len(partitions))
		}
		assertSnapshot(t, "after reopening", load(t, open(t, config(t, c, nil), topic), "configmaps"), want)
	})
	t.Run("a record it cannot read", func(t *testing.T) {
		topic := newTopic()
		open(t, config(t, c, nil), topic)
		produce(t, c, &kgo.Record{Topic: topic, Key: []byte("configmaps/ns/a"), Value: []byte("not json")})
		if err := openErr(t, nil, topic); err == nil || !strings.Contains(err.Error(), "offset 0") {
			t.Errorf("Open: %v; want an error naming the record's offset", err)
		}
	})
}

func produce(t *testing.T, c *kafkatest.Cluster, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
