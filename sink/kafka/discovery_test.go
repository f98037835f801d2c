package kafka

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

var _ sink.DiscoveryRefresher = (*Sink)(nil)

// A discovery topic that deletes by time (made by hand, or by the broker's
// auto-creation) is reported not compacted, and the document is written
// again at half its retention; the topic the sink creates is compacted
// and keeps the document for good.
func TestDiscoveryTopicCompaction(t *testing.T) {
	c := kafkatest.Start(t)
	for i, tc := range []struct {
		name      string
		configs   map[string]string // nil: the sink creates the topic
		compacted bool
		refresh   time.Duration
	}{
		{"created", nil, true, 0},
		{"delete by time", map[string]string{"cleanup.policy": "delete", "retention.ms": "7200000"}, false, time.Hour},
		{"compacted by hand", map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "disc" + strconv.Itoa(i)
			vars := map[string]string{"BRIDGE_KAFKA_TOPIC_PREFIX": prefix}
			if tc.configs != nil {
				c.CreateTopic(wire.DiscoveryTopic(prefix), 1, tc.configs)
				vars["BRIDGE_KAFKA_CREATE_TOPICS"] = "false"
			}
			var mu sync.Mutex
			reports := map[string]bool{}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := New(ctx, clusterConfig(t, c, vars), nil, Options{TopicCompaction: func(topic string, compacted bool) {
				mu.Lock()
				defer mu.Unlock()
				reports[topic] = compacted
			}}, testLogger(t))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			if err := s.WriteDiscovery(ctx, wire.Discovery{Cluster: "c", Resources: []wire.DiscoveredResource{}}); err != nil {
				t.Fatalf("WriteDiscovery: %v", err)
			}
			mu.Lock()
			compacted, reported := reports[wire.DiscoveryTopic(prefix)]
			mu.Unlock()
			if !reported || compacted != tc.compacted {
				t.Errorf("compaction reported %t (reported: %t), want %t", compacted, reported, tc.compacted)
			}
			if got := s.DiscoveryRefresh(); got != tc.refresh {
				t.Errorf("DiscoveryRefresh = %s, want %s", got, tc.refresh)
			}
		})
	}
}
