package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/wire"
)

// The consumer reads what the sink wrote, in a consumer group, and ends
// with the live objects.
func TestRun(t *testing.T) {
	c := kafkatest.Start(t)
	vars := map[string]string{"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ",")}
	var cfg kafka.Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		t.Fatal(err)
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	s := bustest.KafkaSink(t, vars, cms)
	msg := func(name, action string, rv int) *wire.Message {
		return bustest.Object{Cluster: "c", Resource: cms, Kind: "ConfigMap", Namespace: "ns", Name: name}.Message(action, rv, []byte(`{"object":{}}`))
	}
	if err := s.Publish(t.Context(), []*wire.Message{
		msg("a", "added", 1), msg("b", "added", 2), msg("a", "updated", 3), msg("b", "deleted", 4), msg("c", "added", 5),
	}); err != nil {
		t.Fatal(err)
	}

	out := &logtest.Buffer{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// added a, added b, updated a, deleted b, added c; b's tombstone
	// then finds nothing left to forget.
	err := run(ctx, options{brokers: c.Addrs(), topics: []string{"kube.configmaps"}, group: "example", kafka: cfg, maxEvents: 5}, out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Log(out.String())
	if last := lines[len(lines)-1]; !strings.Contains(last, "(2 objects)") {
		t.Errorf("last line %q, want 2 live objects", last)
	}
}
