package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/test/poll"
)

// The held-source scenario's figures: objects of about 5 KiB, a budget of
// a dozen of them, and ten times the budget written while the sink
// accepts nothing.
const (
	heldObjects = 40
	heldRounds  = 3
	heldBudget  = 64 << 10
	// heldStallTimeout is BRIDGE_WATCH_STALL_TIMEOUT: the least there is,
	// so that the source is held for several times it.
	heldStallTimeout = 2 * time.Second
)

// While the sink accepts nothing, the changes waiting for it reach
// BRIDGE_MAX_PENDING_BYTES: the bridge stops reading from the API server
// (bridge_source_held), and what waits stays within the budget
// (bridge_pending_bytes) however much the cluster changes meanwhile. Once
// the sink is back, the watches are read again, resumed or listed anew if
// the API server dropped them meanwhile, and every object reaches its
// latest state on the bus, none going back in time.
func TestFaultSourceHeldBySlowSink(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		h := holdSource(t, b, nil)
		// Held for longer than the watch stall timeout, the watches are
		// not read, which is not silence of the API server: none is cut,
		// and the bridge stays ready.
		poll.Until(t, time.Minute, func() (bool, string) {
			heldFor := gathered(t, h.metrics, "bridge_source_held_seconds_total")
			return heldFor > 2.5*heldStallTimeout.Seconds(), fmt.Sprintf("the source held for %.1fs, not yet %.1fs", heldFor, 2.5*heldStallTimeout.Seconds())
		})
		if err := h.bridge.b.Readiness(); err != nil {
			t.Errorf("not ready with its source held for over %s, the watch stall timeout: %v", heldStallTimeout, err)
		}
		h.gate.open()
		_, took := newBusReader(t, b, h.ns).converge(t, 2*time.Minute)
		heldFor := gathered(t, h.metrics, "bridge_source_held_seconds_total")
		if heldFor <= 0 {
			t.Errorf("bridge_source_held_seconds_total = %v after the source was held", heldFor)
		}
		h.bridge.stop(t)
		after := checkBus(t, b, h.ns, "after the bridge stopped")
		t.Logf("%s: the source was held %.2fs; converged %s after the sink came back, %d events, %d duplicates",
			b.name(), heldFor, took.Round(time.Millisecond), after.events, after.duplicates)
	})
}

// A bridge whose source is held by a sink that takes nothing still stops
// within its shutdown timeout: the stopping source is let through, the
// drain gives up at its deadline, and what was not published was not
// checkpointed. The next bridge, on the same checkpoint, brings every
// object to its latest state.
func TestFaultStopWhileSourceHeld(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		dir := t.TempDir()
		h := holdSource(t, b, map[string]string{
			"BRIDGE_CHECKPOINT":       "file:" + filepath.Join(dir, "checkpoint.db"),
			"BRIDGE_SHUTDOWN_TIMEOUT": "3s",
		})
		began := time.Now()
		h.bridge.stop(t) // fails the test unless Run returns within 60s
		took := time.Since(began)
		if took > 10*time.Second {
			t.Errorf("the bridge took %s to stop with its source held, with a shutdown timeout of 3s", took.Round(time.Millisecond))
		}

		env := maps.Clone(h.env)
		next := startBridge(t, env, nil)
		_, converged := newBusReader(t, b, h.ns).converge(t, 2*time.Minute)
		next.stop(t)
		checkBus(t, b, h.ns, "after the next bridge stopped")
		t.Logf("%s: stopped in %s with its source held; the next bridge converged in %s",
			b.name(), took.Round(time.Millisecond), converged.Round(time.Millisecond))
	})
}

// held is a bridge whose source is held: its sink, a gate, takes nothing.
type held struct {
	ns      string
	env     map[string]string
	gate    *gateSink
	metrics *metrics.Metrics
	bridge  *running
}

// holdSource starts a bridge on b with a budget of heldBudget and extra
// variables, publishes heldObjects ConfigMaps of about 5 KiB, shuts the
// sink's gate, and updates every object heldRounds times: far more than
// the budget. It returns once the bridge's source is held, having checked
// that what waits stays within the budget.
func holdSource(t *testing.T, b bus, extra map[string]string) *held {
	t.Helper()
	ns := namespace(t, "held-"+b.name())
	env := maps.Clone(b.env(ns))
	env["BRIDGE_MAX_PENDING_BYTES"] = strconv.Itoa(heldBudget)
	env["BRIDGE_WORKERS"] = "2"
	env["BRIDGE_BATCH_SIZE"] = "4"
	env["BRIDGE_WATCH_STALL_TIMEOUT"] = heldStallTimeout.String()
	maps.Copy(env, extra)
	h := &held{ns: ns, env: env, gate: &gateSink{Sink: busSink(t, env)}, metrics: metrics.New()}
	h.bridge = startBridgeWith(t, env, bridge.WithSink(h.gate), bridge.WithMetrics(h.metrics))

	cms := fastKube(t).CoreV1().ConfigMaps(ns)
	objs := createChurned(t, cms, heldObjects)
	poll.Until(t, time.Minute, func() (bool, string) {
		n := h.gate.accepted()
		return n == heldObjects, fmt.Sprintf("the sink accepted %d of %d objects", n, heldObjects)
	})

	h.gate.shut()
	for round := 1; round <= heldRounds; round++ {
		parallel(t, 8, heldObjects, func(ctx context.Context, i int) error {
			cm := objs[i].DeepCopy()
			cm.Data = stuckData(i, round)
			up, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
			objs[i] = up
			return err
		})
	}
	written := heldObjects * heldRounds * stuckPayload
	if written < 5*heldBudget {
		t.Fatalf("the scenario writes %d KiB, not far above the budget of %d KiB: it cannot tell holding from buffering", written>>10, heldBudget>>10)
	}
	poll.Until(t, time.Minute, func() (bool, string) {
		n := gathered(t, h.metrics, "bridge_source_held")
		return n >= 1, fmt.Sprintf("bridge_source_held = %v with the sink stuck and %d KiB written", n, written>>10)
	})
	t.Logf("%s: %d KiB written while the sink took nothing, with a budget of %d KiB: the source is held", b.name(), written>>10, heldBudget>>10)
	return h
}

// checkBus reads everything the bus holds of ns, once the bridges that
// publish it stopped, and fails the test unless the view it makes equals
// the API server's and no object's resourceVersion went back; when says
// when, in the failure.
func checkBus(t *testing.T, b bus, ns, when string) verdict {
	t.Helper()
	v := oracle(t, ns, b.read(t, ns))
	if v.mismatch != "" {
		t.Errorf("%s: %s", when, v.mismatch)
	}
	if len(v.backwards) > 0 {
		t.Errorf("%s: resourceVersions went backwards: %s", when, strings.Join(v.backwards, "; "))
	}
	return v
}

// gathered is the value of the metric name, which has no labels, in m.
func gathered(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		x := f.GetMetric()[0]
		switch {
		case x.GetGauge() != nil:
			return x.GetGauge().GetValue()
		case x.GetCounter() != nil:
			return x.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return 0
}
