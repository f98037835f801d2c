package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/logtest"
)

// The consumer reads what the sink wrote, in a consumer group, and ends
// with the live objects.
func TestRun(t *testing.T) {
	c := kafkatest.Start(t)
	var cfg kafka.Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: map[string]string{"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ",")}}); err != nil {
		t.Fatal(err)
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	set, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	s, err := kafka.New(t.Context(), set, []schema.GroupVersionResource{cms}, kafka.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	msg := func(name, action string, rv int) *sink.Message {
		return &sink.Message{
			ID: fmt.Sprint(name, rv), Source: "/clusters/c/api/v1/configmaps", Type: "io.kubebus.object." + action, Subject: "ns/" + name,
			Time: time.Now(), Action: action, Resource: cms, ResourceVersion: fmt.Sprint(rv), UID: "uid-" + name, Kind: "ConfigMap",
			APIVersion: "v1", Namespace: "ns", Name: name, Cluster: "c", Data: []byte(`{"object":{}}`),
		}
	}
	if err := s.Publish(t.Context(), []*sink.Message{
		msg("a", "added", 1), msg("b", "added", 2), msg("a", "updated", 3), msg("b", "deleted", 4), msg("c", "added", 5),
	}); err != nil {
		t.Fatal(err)
	}

	out := &logtest.Buffer{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// added a, added b, updated a, deleted b, added c; b's tombstone
	// then finds nothing left to forget.
	err = run(ctx, options{brokers: c.Addrs(), topics: []string{"kube.configmaps"}, group: "example", kafka: cfg, maxEvents: 5}, out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Log(out.String())
	if last := lines[len(lines)-1]; !strings.Contains(last, "(2 objects)") {
		t.Errorf("last line %q, want 2 live objects", last)
	}
}
