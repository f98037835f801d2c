package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// A resource added while the sink runs gets its topic, made as New makes
// them, and its messages go there; without Options.ResourcesAdded it is
// refused, naming the topic.
func TestPrepareAddsTheTopicOfAResource(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	t.Run("with resources added", func(t *testing.T) {
		c := kafkatest.Start(t)
		cfg := clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "3"})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		s, err := New(ctx, cfg, []schema.GroupVersionResource{configmaps}, Options{ResourcesAdded: true}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		if c.Partitions("kube.widgets.example.com") != 0 {
			t.Fatal("the topic of widgets exists before Prepare")
		}
		for range 2 { // the second finds it made
			if err := s.Prepare(ctx, widgets); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
		}
		if got := c.Partitions("kube.widgets.example.com"); got != 3 {
			t.Errorf("kube.widgets.example.com: %d partitions, want 3", got)
		}
		if got := c.TopicConfig("kube.widgets.example.com", "cleanup.policy"); got != "compact" {
			t.Errorf("kube.widgets.example.com: cleanup.policy %q, want compact (the state layout)", got)
		}
		if err := s.Publish(ctx, []*wire.Message{message(widgets, "ns", "w", "added", 7)}); err != nil {
			t.Fatalf("Publish to the topic added: %v", err)
		}
		recs := c.ReadAll("kube.widgets.example.com")
		if len(recs) != 1 || string(recs[0].Key) != "ns/w" {
			t.Errorf("kube.widgets.example.com holds %d records, want the one published", len(recs))
		}
	})
	t.Run("without", func(t *testing.T) {
		c := kafkatest.Start(t)
		s := newSink(t, clusterConfig(t, c, nil), configmaps)
		if err := s.Prepare(t.Context(), configmaps); err != nil {
			t.Errorf("Prepare of a resource New was given: %v", err)
		}
		err := s.Prepare(t.Context(), widgets)
		if err == nil || !strings.Contains(err.Error(), "kube.widgets.example.com") {
			t.Errorf("Prepare: %v; want an error naming the topic", err)
		}
		if c.Partitions("kube.widgets.example.com") != 0 {
			t.Error("the topic was created anyway")
		}
	})
}
