// Package podphasestest is the scenario the informer examples' tests share,
// written once and run per bus: Pod events published through a bridge sink,
// an example reading them with podphases, its output checked.
package podphasestest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Cluster is the cluster name of the scenario's events; the example must
// be run for it.
const Cluster = "demo"

// Pods is the resource of the scenario's events.
var Pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Run publishes a state to s, starts run (the example, printing to the
// writer it is given) and checks that it prints that state's summary, then
// follows a phase change and a delete published while it runs. run must
// return nil once its context ends.
func Run(t *testing.T, s sink.Sink, run func(ctx context.Context, out io.Writer) error) {
	t.Helper()
	publish := func(msgs ...*wire.Message) {
		t.Helper()
		if err := s.Publish(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	// The state before the example starts: db was Running, then Pending
	// (a state layout keeps only its latest message); gone was added and
	// deleted.
	publish(
		podEvent("added", "team-a", "web", "Running", 10),
		podEvent("added", "team-a", "db", "Running", 11),
		podEvent("added", "team-b", "job", "Succeeded", 12),
		podEvent("updated", "team-a", "db", "Pending", 13),
		podEvent("added", "team-c", "gone", "Running", 14),
		podEvent("deleted", "team-c", "gone", "Running", 15),
	)

	out := &logtest.Buffer{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, out) }()
	waitOutput(t, out, "3 pods in 2 namespaces\n  team-a: Pending=1 Running=1\n  team-b: Succeeded=1\n")
	if !strings.HasPrefix(out.String(), "synced at bus position ") {
		t.Errorf("output does not start with the position it synced at:\n%s", out)
	}

	publish(podEvent("updated", "team-a", "db", "Running", 16), podEvent("deleted", "team-b", "job", "Succeeded", 17))
	waitOutput(t, out, "team-a/db: Pending -> Running (API resourceVersion 16)\n")
	waitOutput(t, out, "2 pods in 1 namespace\n  team-a: Running=2\n")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("output:\n%s", out)
}

// waitOutput waits until out holds want.
func waitOutput(t *testing.T, out *logtest.Buffer, want string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(out.String(), want), fmt.Sprintf("output lacks\n%s\nit is\n%s", want, out)
	})
}

// podEvent is the bridge's event for a Pod of Cluster in phase.
func podEvent(action, ns, name, phase string, rv int) *wire.Message {
	obj, err := json.Marshal(map[string]any{"object": map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name, "resourceVersion": fmt.Sprint(rv)},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "main", "image": "busybox"}}},
		"status":   map[string]any{"phase": phase},
	}})
	if err != nil {
		panic(err)
	}
	return bustest.Object{Cluster: Cluster, Resource: Pods, Kind: "Pod", Namespace: ns, Name: name}.Message(action, rv, obj)
}
