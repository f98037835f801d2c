package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/natstest"
)

// output collects what run prints.
type output struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output holds want.
func (o *output) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(o.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks\n%s\nafter 30s; it is\n%s", want, o)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// podEvent is the bridge's event for a Pod of cluster "demo" in phase.
func podEvent(action, ns, name, phase string, rv int) *sink.Message {
	obj, err := json.Marshal(map[string]any{"object": map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name, "resourceVersion": fmt.Sprint(rv)},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "main", "image": "busybox"}}},
		"status":   map[string]any{"phase": phase},
	}})
	if err != nil {
		panic(err)
	}
	return &sink.Message{
		ID: fmt.Sprintf("uid-%s-%d-%s", name, rv, action), Source: "/clusters/demo/api/v1/pods", Type: "io.kubebus.object." + action,
		Subject: ns + "/" + name, Time: time.Now(), Action: action,
		Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ResourceVersion: fmt.Sprint(rv),
		UID: "uid-" + name, Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name, Cluster: "demo",
		Data: obj,
	}
}

// The example reads the Pods the stream holds, prints their summary, then
// follows a phase change and a delete.
func TestRun(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	vars := srv.Env()
	vars["BRIDGE_NATS_LAYOUT"] = natssink.LayoutState
	var cfg natssink.Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		t.Fatal(err)
	}
	s, err := natssink.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	publish := func(msgs ...*sink.Message) {
		t.Helper()
		if err := s.Publish(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	// The state before the example starts: db was Pending, then Running,
	// then Pending again; the stream keeps only its latest message.
	publish(
		podEvent("added", "team-a", "web", "Running", 10),
		podEvent("added", "team-a", "db", "Running", 11),
		podEvent("added", "team-b", "job", "Succeeded", 12),
		podEvent("updated", "team-a", "db", "Pending", 13),
		podEvent("added", "team-c", "gone", "Running", 14),
		podEvent("deleted", "team-c", "gone", "Running", 15),
	)

	out := &output{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{url: srv.URL(), cluster: "demo", interval: 20 * time.Millisecond}, out, slog.New(slog.DiscardHandler))
	}()
	out.waitFor(t, "3 pods in 2 namespaces\n  team-a: Pending=1 Running=1\n  team-b: Succeeded=1\n")
	if !strings.HasPrefix(out.String(), "synced at bus position ") {
		t.Errorf("output does not start with the position it synced at:\n%s", out)
	}

	publish(podEvent("updated", "team-a", "db", "Running", 16), podEvent("deleted", "team-b", "job", "Succeeded", 17))
	out.waitFor(t, "team-a/db: Pending -> Running (API resourceVersion 16)\n")
	out.waitFor(t, "2 pods in 1 namespace\n  team-a: Running=2\n")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("output:\n%s", out)
}

// A missing cluster name is an error that names the flag.
func TestRunNeedsCluster(t *testing.T) {
	err := run(t.Context(), options{url: "nats://127.0.0.1:1"}, &output{}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-cluster") {
		t.Fatalf("run without -cluster: %v, want an error naming -cluster", err)
	}
}
