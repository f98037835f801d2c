package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/sink"
)

// The shutdown scenario's figures.
const (
	// shutdownObjects is how many ConfigMaps the writers churn.
	shutdownObjects = 200
	// shutdownChangesDown is how many changes are made while the bridge
	// is down, for the restart to find.
	shutdownChangesDown = 150
	shutdownSeed        = 23
)

// Issue 5, shutdown: SIGTERM while writers churn. The bridge publishes
// what it had in flight, flushes the checkpoint and exits with 0; the
// checkpoint then holds exactly the last state the bus holds of every
// object. Changes go on while it is down; started again with the writers
// stopped, the bridge publishes exactly those changes: nothing the first
// run published comes again, by event id or by (key, resourceVersion).
func TestFaultShutdown(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "fault-shutdown-"+b.name())
		env := maps.Clone(b.env(ns))
		// No periodic flush comes within the test: what was acknowledged
		// after the bridge's last other flush reaches the checkpoint only
		// through the shutdown's.
		env["BRIDGE_CHECKPOINT_INTERVAL"] = "1h"
		env["BRIDGE_SHUTDOWN_TIMEOUT"] = "25s"
		environ := procEnv(env)
		out := filepath.Join(t.TempDir(), "stdout") // the bus is the sink: stays empty
		probe := newBusProbe(t, b, ns)

		p := startProc(t, environ, out)
		w := startChurners(t, ns, shutdownObjects, 3, shutdownSeed)
		atTerm := probe.waitGrown(t, 0, 300, "before SIGTERM")
		sigterm := time.Now()
		code := p.terminate(t)
		exited := time.Now()
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		stored := probe.count()
		stopped := stoppedLine(t, p)
		if strings.Contains(p.logText(), "shutdown deadline reached") {
			t.Errorf("the shutdown hit its deadline with a healthy bus:\n%s", p.logText())
		}
		if n, _ := stopped["abandoned"].(float64); n != 0 {
			t.Errorf("%v deltas abandoned at shutdown, want 0", stopped["abandoned"])
		}

		// The writers go on while the bridge is down, then stop.
		before := w.made.Load()
		w.waitMade(t, before, shutdownChangesDown, "while the bridge is down")
		made := w.stop()
		first := b.read(t, ns)
		last := lastStates(first)

		// The first run flushed the checkpoint on its way out: it holds
		// the last state the bus holds of every object, deletes included.
		ckpt := readCheckpoint(t, b, ns)
		for key, m := range last {
			if pos := ckpt.Objects[key]; pos.UID != m.UID || pos.ResourceVersion != m.ResourceVersion {
				t.Errorf("checkpoint of %s: %+v; the bus's last state is %s", key, pos, describeMsg(m))
			}
		}
		for key, pos := range ckpt.Objects {
			if _, ok := last[key]; !ok {
				t.Errorf("checkpoint holds %s at %+v, which the bus has as deleted or never had", key, pos)
			}
		}

		restarted := time.Now()
		p = startProc(t, environ, out)
		ready := time.Since(restarted)
		v, msgs := settleOracle(t, b, ns, probe, 30*time.Second)
		if v.mismatch != "" {
			t.Errorf("the view does not converge on the LIST after the restart: %s%s", v.mismatch, explainMismatch(t, ns, msgs, []time.Time{exited}))
		}
		if code := p.terminate(t); code != 0 {
			t.Errorf("second run: exit code %d after SIGTERM, want 0", code)
		}
		// What the restart converged on: the state the writers left.
		list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.backwards) > 0 {
			t.Errorf("%d resourceVersions went backwards: %s", len(v.backwards), strings.Join(v.backwards, "; "))
		}
		if v.duplicates != 0 {
			t.Errorf("%d duplicates, want 0", v.duplicates)
		}

		// What the second run published: by id and by state, nothing of
		// the first run.
		ids := map[string]*sink.Message{}
		states := map[keyRV]*sink.Message{}
		for _, m := range first {
			ids[m.ID] = m
			states[keyRV{m.Key(), m.ResourceVersion}] = m
		}
		var second []*sink.Message
		for _, m := range msgs {
			if runOfMsg(m, []time.Time{exited}) == 0 {
				continue
			}
			second = append(second, m)
			if f, ok := ids[m.ID]; ok {
				t.Errorf("the restart published %s again (first run: %s)", describeMsg(m), describeMsg(f))
			} else if f, ok := states[keyRV{m.Key(), m.ResourceVersion}]; ok {
				t.Errorf("the restart published the state of %s again, as %s", describeMsg(f), describeMsg(m))
			}
		}
		// And exactly what changed while it was down, one message per
		// change of state (two when an object was created again under a
		// new uid).
		want := map[string][]string{}
		live := map[string]bool{}
		for _, cm := range list.Items {
			key := ns + "/" + cm.Name
			live[key] = true
			prev, had := last[key]
			switch {
			case !had:
				want[key] = []string{fmt.Sprintf("added %s at %s", cm.UID, cm.ResourceVersion)}
			case prev.UID != string(cm.UID):
				want[key] = []string{"deleted " + prev.UID, fmt.Sprintf("added %s at %s", cm.UID, cm.ResourceVersion)}
			case prev.ResourceVersion != cm.ResourceVersion:
				want[key] = []string{fmt.Sprintf("updated %s at %s", cm.UID, cm.ResourceVersion)}
			}
		}
		for key, prev := range last {
			if !live[key] {
				want[key] = []string{"deleted " + prev.UID}
			}
		}
		got := map[string][]string{}
		for _, m := range second {
			s := m.Action + " " + m.UID
			if m.Action != "deleted" {
				s += " at " + m.ResourceVersion // a delete found on restart carries the list's
			}
			if !m.Snapshot {
				s += " (not marked snapshot)"
			}
			got[m.Key()] = append(got[m.Key()], s)
		}
		for _, key := range slices.Sorted(maps.Keys(want)) {
			if !slices.Equal(got[key], want[key]) {
				t.Errorf("restart: %s got %q, want %q", key, got[key], want[key])
			}
		}
		for _, key := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[key]; !ok {
				t.Errorf("restart: %s got %q for an object that did not change while the bridge was down", key, got[key])
			}
		}

		t.Logf("%s: SIGTERM after %d messages on the bus; exit %d %s later, %d more stored meanwhile; the bridge said %s; "+
			"%d changes made in all, %d while it was down; the restart was ready in %s and published %d messages for %d changed objects",
			b.name(), atTerm, code, exited.Sub(sigterm).Round(time.Millisecond), stored-atTerm, stoppedSummary(stopped),
			made, made-before, ready.Round(time.Millisecond), len(second), len(want))
	})
}

// lastStates is the last message of every object in msgs that is not
// deleted at the end.
func lastStates(msgs []*sink.Message) map[string]*sink.Message {
	out := map[string]*sink.Message{}
	for _, m := range msgs {
		if m.Action == "deleted" {
			delete(out, m.Key())
		} else {
			out[m.Key()] = m
		}
	}
	return out
}

// stoppedLine returns the fields of the bridge's "stopped" log line.
func stoppedLine(t *testing.T, p *proc) map[string]any {
	t.Helper()
	for line := range strings.Lines(p.logText()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "stopped" {
			return rec
		}
	}
	t.Errorf("no \"stopped\" line in the bridge's log:\n%s", p.logText())
	return map[string]any{}
}

// stoppedSummary is the counters of a "stopped" line, for the test log.
func stoppedSummary(rec map[string]any) string {
	var parts []string
	for _, k := range []string{"took", "published", "retried", "coalesced", "abandoned", "checkpointFlushes"} {
		v := rec[k]
		if n, ok := v.(float64); ok && k == "took" {
			v = time.Duration(n).Round(time.Millisecond) // slog's JSON writes durations in nanoseconds
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}
