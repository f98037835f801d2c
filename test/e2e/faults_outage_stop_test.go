package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/poll"
)

// The figures of the stop during an outage.
const (
	outageStopObjects = 100
	// outageStopPending is how many changes the bridge must hold, unable
	// to publish them, when it is told to stop.
	outageStopPending = 100
	outageStopSeed    = 17
)

// Issue 5, a stop while the broker is down: the bridge holds changes it
// cannot publish, the latest of their objects, when it is told to stop. It gives up on them at its
// shutdown deadline and exits, and its checkpoint must not claim them:
// after a restart with the broker back, the bus's view equals the API
// server's LIST. The checkpoint is a file here, so that it can be written
// while the bus is down; a checkpoint kept in the bus is as unreachable as
// the bus itself. A checkpoint that advanced before the broker's ack loses
// exactly these changes.
func TestFaultStopDuringOutage(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		h := holdDuringOutage(t, b, "fault-outstop-", "1s", outageStopObjects, outageStopPending, outageStopSeed)
		code := h.p.terminate(t)
		stopped := stoppedLine(t, h.p)
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM during the outage, want 0", code)
		}
		if n, _ := stopped["abandoned"].(float64); n == 0 {
			t.Errorf("nothing abandoned at a shutdown during the outage: %s", stoppedSummary(stopped))
		}
		v := h.restartConverges(t)
		t.Logf("%s: %d changes made; %.0f held unpublished at SIGTERM; first run: %s; after the restart %d events, %d duplicates",
			b.name(), h.made, h.pending, stoppedSummary(stopped), v.events, v.duplicates)
	})
}

// heldByOutage is a bridge, run as a process, that holds changes it
// cannot publish because its bus is down.
type heldByOutage struct {
	b       bus
	ns      string
	p       *proc
	environ []string
	out     string
	probe   *busProbe
	made    int64   // changes the writers made
	pending float64 // changes observed and not published when it returned
}

// holdDuringOutage starts the bridge as a process on b, with a file
// checkpoint (so that it can be written while the bus is down) and
// shutdownTimeout, churns objects ConfigMaps of a new namespace named from
// prefix, and stops the bus. It returns once the bridge holds at least
// pending changes it could not publish and has seen every change the
// writers made, which have stopped: the last state of every object they
// touched during the outage is one the bridge holds unpublished.
func holdDuringOutage(t *testing.T, b bus, prefix, shutdownTimeout string, objects, pending int, seed uint64) *heldByOutage {
	t.Helper()
	h := &heldByOutage{b: b, ns: namespace(t, prefix+b.name())}
	env := maps.Clone(b.env(h.ns))
	env["BRIDGE_CHECKPOINT"] = "file:" + filepath.Join(t.TempDir(), "checkpoint.db")
	env["BRIDGE_CHECKPOINT_INTERVAL"] = "200ms"
	env["BRIDGE_RETRY_MAX_INTERVAL"] = "500ms"
	env["BRIDGE_SHUTDOWN_TIMEOUT"] = shutdownTimeout
	if b.name() == "nats" {
		env["BRIDGE_NATS_RECONNECT_MAX_WAIT"] = "500ms"
	}
	h.environ = procEnv(env)
	h.out = filepath.Join(t.TempDir(), "stdout") // the bus is the sink: stays empty
	h.probe = newBusProbe(t, b, h.ns)

	h.p = startProc(t, h.environ, h.out)
	addr := h.p.httpAddr(t)
	w := startChurners(t, h.ns, objects, 2, seed)
	h.probe.waitGrown(t, 0, 100, "before the outage")
	b.stop(t)
	poll.Until(t, time.Minute, func() (bool, string) {
		s, ok := scrape(addr)
		h.pending = s.Sum("bridge_deltas_observed_total") - s.Sum("bridge_deltas_published_total")
		return ok && h.pending >= float64(pending) && s.Sum("bridge_deltas_failed_total") > 0,
			fmt.Sprintf("%.0f deltas observed and not published, want %d, and failed publishes", h.pending, pending)
	})
	h.made = w.stop()
	poll.Until(t, time.Minute, func() (bool, string) {
		s, _ := scrape(addr)
		observed := s.Sum("bridge_deltas_observed_total")
		// A write whose answer the writer never got is not counted in
		// made, though it may have happened: at least made.
		return observed >= float64(h.made), fmt.Sprintf("the bridge observed %.0f of %d changes", observed, h.made)
	})
	return h
}

// restartConverges starts the bus again and, once the stopped bridge has
// exited, a new one, and checks that the bus's view converges on the API
// server's LIST, with no resourceVersion going backwards and, on
// JetStream, no duplicate. It stops the new bridge.
func (h *heldByOutage) restartConverges(t *testing.T) verdict {
	t.Helper()
	h.b.start(t)
	h.p = startProc(t, h.environ, h.out)
	v, msgs := settleOracle(t, h.b, h.ns, h.probe, 30*time.Second)
	if code := h.p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if v.mismatch != "" {
		t.Errorf("the view does not converge on the LIST after the restart: %s%s", v.mismatch, explainMismatch(t, h.ns, msgs, nil))
	}
	if len(v.backwards) > 0 {
		t.Errorf("%d resourceVersions went backwards: %s", len(v.backwards), strings.Join(v.backwards, "; "))
	}
	if h.b.name() == "nats" && v.duplicates != 0 {
		t.Errorf("JetStream stored %d duplicates, want 0", v.duplicates)
	}
	return v
}
