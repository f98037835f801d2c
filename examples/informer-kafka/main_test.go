package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/examples/internal/podphases/podphasestest"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/kafkatest"
)

// The example reads the Pods the topic holds, prints their summary, then
// follows a phase change and a delete.
func TestRun(t *testing.T) {
	c := kafkatest.Start(t)
	s := bustest.KafkaSink(t, map[string]string{"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ","), "BRIDGE_KAFKA_LAYOUT": string(kafka.LayoutState)}, podphasestest.Pods)
	podphasestest.Run(t, s, func(ctx context.Context, out io.Writer) error {
		return run(ctx, options{brokers: c.Addrs(), cluster: podphasestest.Cluster, interval: 20 * time.Millisecond}, out, slog.New(slog.DiscardHandler))
	})
}

// A missing cluster name is an error that names the flag.
func TestRunNeedsCluster(t *testing.T) {
	err := run(t.Context(), options{brokers: []string{"127.0.0.1:1"}}, io.Discard, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-cluster") {
		t.Fatalf("run without -cluster: %v, want an error naming -cluster", err)
	}
}
