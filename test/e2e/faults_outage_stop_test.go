package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		ns := namespace(t, "fault-outstop-"+b.name())
		env := maps.Clone(b.env(ns))
		env["BRIDGE_CHECKPOINT"] = "file:" + filepath.Join(t.TempDir(), "checkpoint.db")
		env["BRIDGE_CHECKPOINT_INTERVAL"] = "200ms"
		env["BRIDGE_RETRY_MAX_INTERVAL"] = "500ms"
		env["BRIDGE_SHUTDOWN_TIMEOUT"] = "1s"
		if b.name() == "nats" {
			env["BRIDGE_NATS_RECONNECT_MAX_WAIT"] = "500ms"
		}
		environ := procEnv(env)
		out := filepath.Join(t.TempDir(), "stdout") // the bus is the sink: stays empty
		probe := newBusProbe(t, b, ns)

		p := startProc(t, environ, out)
		addr := p.httpAddr(t)
		w := startChurners(t, ns, outageStopObjects, 2, outageStopSeed)
		probe.waitGrown(t, 0, 100, "before the outage")
		b.stop(t)
		// Wait until the bridge holds enough changes it could not publish.
		var pending float64
		eventually(t, time.Minute, func() (bool, string) {
			s, ok := scrape(addr)
			pending = s.Sum("bridge_deltas_observed_total") - s.Sum("bridge_deltas_published_total")
			return ok && pending >= outageStopPending && s.Sum("bridge_deltas_failed_total") > 0,
				fmt.Sprintf("%.0f deltas observed and not published, want %d, and failed publishes", pending, outageStopPending)
		})
		// The writers stop, so that the last state of every object they
		// touched during the outage is one the bridge holds unpublished;
		// the bridge stops once it has seen every change.
		made := w.stop()
		eventually(t, time.Minute, func() (bool, string) {
			s, _ := scrape(addr)
			observed := s.Sum("bridge_deltas_observed_total")
			// A write whose answer the writer never got is not counted in
			// made, though it may have happened: at least made.
			return observed >= float64(made), fmt.Sprintf("the bridge observed %.0f of %d changes", observed, made)
		})
		code := p.terminate(t)
		stopped := stoppedLine(t, p)
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM during the outage, want 0", code)
		}
		if n, _ := stopped["abandoned"].(float64); n == 0 {
			t.Errorf("nothing abandoned at a shutdown during the outage: %s", stoppedSummary(stopped))
		}

		b.start(t)
		p = startProc(t, environ, out)
		v, msgs := settleOracle(t, b, ns, probe, 30*time.Second)
		if code := p.terminate(t); code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		if v.mismatch != "" {
			t.Errorf("the view does not converge on the LIST after the restart: %s%s", v.mismatch, explainMismatch(t, ns, msgs, nil))
		}
		if len(v.backwards) > 0 {
			t.Errorf("%d resourceVersions went backwards: %s", len(v.backwards), strings.Join(v.backwards, "; "))
		}
		if b.name() == "nats" && v.duplicates != 0 {
			t.Errorf("JetStream stored %d duplicates, want 0", v.duplicates)
		}
		t.Logf("%s: %d changes made; %.0f held unpublished at SIGTERM; first run: %s; after the restart %d events, %d duplicates",
			b.name(), made, pending, stoppedSummary(stopped), v.events, v.duplicates)
	})
}
