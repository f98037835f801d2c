package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/examples/internal/podphases/podphasestest"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/natstest"
)

// The example reads the Pods the stream holds, prints their summary, then
// follows a phase change and a delete.
func TestRun(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	vars := srv.Env()
	vars["BRIDGE_NATS_LAYOUT"] = string(natssink.LayoutState)
	s := bustest.NATSSink(t, vars)
	podphasestest.Run(t, s, func(ctx context.Context, out io.Writer) error {
		return run(ctx, options{url: srv.URL(), cluster: podphasestest.Cluster, interval: 20 * time.Millisecond}, out, slog.New(slog.DiscardHandler))
	})
}

// A missing cluster name is an error that names the flag.
func TestRunNeedsCluster(t *testing.T) {
	err := run(t.Context(), options{url: "nats://127.0.0.1:1"}, io.Discard, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-cluster") {
		t.Fatalf("run without -cluster: %v, want an error naming -cluster", err)
	}
}
