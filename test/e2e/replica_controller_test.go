package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubebus/bridge/examples/replica-controller/mirror"
	"github.com/kubebus/bridge/test/poll"
)

// TestReplicaController runs the example controller of
// examples/replica-controller: its Manager's cache reads the replica of a
// bridge's NATS stream, its client writes to the API server. For every
// ConfigMap labelled kubebus.io/example=mirror that the API server lists,
// it must write <name>-seen with that ConfigMap's resourceVersion on the
// API server, through a create, an update, and a ConfigMap created while it
// runs; and none for a ConfigMap without the label. A ConfigMap the replica
// held back, or showed at an older state, leaves its <name>-seen missing or
// behind, and the test fails naming it.
func TestReplicaController(t *testing.T) {
	forEachReplicaBus(t, testReplicaController)
}

func testReplicaController(t *testing.T, b bus) {
	ns, r := replicaOf(t, b)
	cms := kube(t).CoreV1().ConfigMaps(ns)
	create := func(name string, labelled bool) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}
		if labelled {
			cm.Labels = map[string]string{mirror.Label: mirror.LabelValue}
		}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		create(fmt.Sprintf("mirror-%d", i), true)
	}
	create("plain", false)

	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// A request to the replica that hangs fails the test instead of
	// hanging it; the informers' watches, cut at 30s too, are opened again.
	replica := r.restConfig("e2e", replicaToken)
	replica.Timeout = 30 * time.Second
	mgr, err := mirror.NewManager(replica, cp.RESTConfig(), manager.Options{
		Logger:  logr.FromSlogHandler(log.Handler()),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The controller's name is unique per manager, not per process:
		// this test starts one manager per bus.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("the manager stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop within 30s")
		}
	})

	// untilMirrored: every labelled ConfigMap on the API server has its
	// <name>-seen at its resourceVersion there, and nothing else has one.
	untilMirrored := func(what string) {
		t.Helper()
		poll.Until(t, 60*time.Second, func() (bool, string) {
			sources := apiVersions(t, ns, mirror.Label+"="+mirror.LabelValue)
			all, err := cms.List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			seen := versions{}
			for _, cm := range all.Items {
				if src, ok := cm.Data["source"]; ok && cm.Name == src+mirror.SeenSuffix {
					seen[ns+"/"+src] = cm.Data[mirror.SeenKey]
				}
			}
			if len(sources) == 0 {
				return false, "no labelled ConfigMap on the API server"
			}
			return sources.equal(seen), fmt.Sprintf("%s: the API server's labelled ConfigMaps %v, their copies record %v", what, sources, seen)
		})
	}
	untilMirrored("the initial state")

	cm, err := cms.Get(t.Context(), "mirror-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("mirror-late", true)
	untilMirrored("an update and a create")

	if _, err := cms.Get(t.Context(), "plain"+mirror.SeenSuffix, metav1.GetOptions{}); err == nil {
		t.Error("plain, which has no label, has a copy")
	}
}

// testWriter sends the controller's log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
