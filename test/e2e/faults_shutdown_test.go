package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// The shutdown scenario's figures.
const (
	// shutdownObjects is how many ConfigMaps the writers churn.
	shutdownObjects = 200
	// shutdownChangesDown is how many changes are made while the bridge
	// is down, for the restart to find.
	shutdownChangesDown = 150
	shutdownSeed        = 23
	// shutdownHeld is how many changes a bridge on a frozen bus must hold
	// unpublished when it is told to stop.
	shutdownHeld = 100
)

// Issue 5 and 16, shutdown: SIGTERM while writers churn, on a healthy bus
// and on a frozen one (it stays connected but takes nothing more, so every
// publish and every close waits on it). Either way the bridge is gone
// within BRIDGE_SHUTDOWN_TIMEOUT of the signal, the one budget its drain,
// final checkpoint flush and closes share, exits with 0, and its
// checkpoint then holds exactly the last state the bus holds of every
// object: on the healthy bus after publishing everything it had, on the
// frozen one after abandoning what it could not publish. Changes go on
// while it is down; started again with the writers stopped (and the bus
// back), the bridge publishes exactly those changes and what it
// abandoned: nothing the first run published comes again, by event id or
// by (key, resourceVersion).
func TestFaultShutdown(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		forEachBus(t, func(t *testing.T, b bus) { stopUnderLoad(t, b, "25s", false) })
	})
	// 10s: the stages as they were, a drain of the whole timeout, then up
	// to 10 s of flush and 11 s (NATS) or minutes (Kafka) of close, took
	// far longer.
	t.Run("frozen", func(t *testing.T) {
		forEachBus(t, func(t *testing.T, b bus) { stopUnderLoad(t, b, "10s", true) })
	})
}

// stopUnderLoad is TestFaultShutdown's scenario on b, with budget as
// BRIDGE_SHUTDOWN_TIMEOUT, the bus frozen just before SIGTERM if frozen.
func stopUnderLoad(t *testing.T, b bus, budget string, frozen bool) {
	ns := namespace(t, "fault-shutdown-"+b.name())
	env := maps.Clone(b.env(ns))
	// No periodic flush comes within the test: what was acknowledged
	// after the bridge's last other flush reaches the checkpoint only
	// through the shutdown's.
	env["BRIDGE_CHECKPOINT_INTERVAL"] = "1h"
	env["BRIDGE_SHUTDOWN_TIMEOUT"] = budget
	firstEnv, freeze, thaw := env, func() {}, func() {}
	if frozen {
		// A file, which the frozen bus cannot hold up.
		env["BRIDGE_CHECKPOINT"] = "file:" + filepath.Join(t.TempDir(), "checkpoint.db")
		firstEnv, freeze, thaw = b.(freezable).freezable(t, env)
	}
	limit, err := time.ParseDuration(budget)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "stdout") // the bus is the sink: stays empty
	probe := newBusProbe(t, b, ns)

	p := startProc(t, procEnv(firstEnv), out)
	w := startChurners(t, ns, shutdownObjects, 3, shutdownSeed)
	atTerm := probe.waitGrown(t, 0, 300, "before SIGTERM")
	if frozen {
		freeze()
		addr := p.httpAddr(t)
		poll.Until(t, time.Minute, func() (bool, string) {
			s, ok := scrape(addr)
			held := s.Sum("bridge_deltas_observed_total") - s.Sum("bridge_deltas_published_total")
			return ok && held >= shutdownHeld, fmt.Sprintf("the bridge holds %.0f changes unpublished, want %d", held, shutdownHeld)
		})
	}
	sigterm := time.Now()
	code := p.terminate(t)
	exited := time.Now()
	if took := exited.Sub(sigterm); took > limit {
		t.Errorf("the bridge exited %s after SIGTERM, past BRIDGE_SHUTDOWN_TIMEOUT=%s: a pod would have been killed", took.Round(time.Millisecond), budget)
	}
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	stored := probe.count()
	stopped := stoppedLine(t, p)
	abandoned, _ := stopped["abandoned"].(float64)
	switch {
	case !frozen && strings.Contains(p.logText(), "shutdown deadline reached"):
		t.Errorf("the shutdown hit its deadline with a healthy bus:\n%s", p.logText())
	case !frozen && abandoned != 0:
		t.Errorf("%v deltas abandoned at shutdown, want 0", stopped["abandoned"])
	case frozen && abandoned == 0:
		t.Errorf("nothing abandoned at a shutdown on a frozen bus: %s", stoppedSummary(stopped))
	}
	if strings.Contains(p.logText(), "final flush failed") {
		t.Errorf("the checkpoint's final flush failed")
	}

	// The writers go on while the bridge is down, then stop.
	before := w.made.Load()
	w.waitMade(t, before, shutdownChangesDown, "while the bridge is down")
	made := w.stop()
	first := b.read(t, ns)
	last := lastStates(first)

	// The first run flushed the checkpoint on its way out: it holds
	// the last state the bus holds of every object, deletes included.
	// On the frozen bus it may hold an earlier state the bus holds, when
	// the bus took the last one without acknowledging it (a Kafka delete
	// is two records), or the intent to publish a creation the bus never
	// took; never a state the bus does not hold.
	ckpt := readCheckpointOf(t, b, env)
	onBus := map[keyRV]bool{}
	for _, m := range first {
		onBus[keyRV{m.Key(), m.ResourceVersion}] = true
	}
	behind := 0
	lagging := func(key string, pos checkpoint.Position) bool {
		ok := frozen && (pos.IsIntent() || onBus[keyRV{key, pos.ResourceVersion}])
		if ok {
			behind++
		}
		return ok
	}
	for key, m := range last {
		pos, ok := ckpt.Objects[key]
		if (pos.UID != m.UID || pos.ResourceVersion != m.ResourceVersion) && !(ok && lagging(key, pos)) {
			t.Errorf("checkpoint of %s: %+v; the bus's last state is %s", key, pos, describeMsg(m))
		}
	}
	for key, pos := range ckpt.Objects {
		if _, ok := last[key]; !ok && !lagging(key, pos) {
			t.Errorf("checkpoint holds %s at %+v, which the bus has as deleted or never had", key, pos)
		}
	}
	thaw()

	restarted := time.Now()
	p = startProc(t, procEnv(env), out)
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
	ids := map[string]*wire.Message{}
	states := map[keyRV]*wire.Message{}
	for _, m := range first {
		ids[m.ID] = m
		states[keyRV{m.Key(), m.ResourceVersion}] = m
	}
	var second []*wire.Message
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
	// And exactly what changed since what was published: one message per
	// change of state (two when an object was created again under a new
	// uid). In a state layout the bus is the record (the restart reads
	// it): what it holds was published. Otherwise the checkpoint, which
	// holds the bus's last state (checked above); an intent the frozen
	// bus left there is a creation that may or may not have reached the
	// bus: its object is published as created, or as deleted if it is
	// gone.
	published := ckpt.Objects
	if busHoldsState(b, env) {
		published = map[string]checkpoint.Position{}
		for key, m := range last {
			published[key] = checkpoint.Position{UID: m.UID, ResourceVersion: m.ResourceVersion}
		}
	}
	want := map[string][]string{}
	live := map[string]bool{}
	for _, cm := range list.Items {
		key := ns + "/" + cm.Name
		live[key] = true
		added := fmt.Sprintf("added %s at %s", cm.UID, cm.ResourceVersion)
		prev, had := published[key]
		switch {
		case !had:
			want[key] = []string{added}
		case prev.UID != string(cm.UID):
			want[key] = []string{"deleted " + prev.UID, added}
		case prev.IsIntent():
			want[key] = []string{added}
		case prev.ResourceVersion != cm.ResourceVersion:
			want[key] = []string{fmt.Sprintf("updated %s at %s", cm.UID, cm.ResourceVersion)}
		}
	}
	for key, prev := range published {
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

	t.Logf("%s: SIGTERM after %d messages on the bus; exit %d %s later (BRIDGE_SHUTDOWN_TIMEOUT=%s), %d more stored meanwhile; the bridge said %s; "+
		"the checkpoint behind the bus for %d objects; %d changes made in all, %d while it was down; the restart was ready in %s and published %d messages for %d changed objects",
		b.name(), atTerm, code, exited.Sub(sigterm).Round(time.Millisecond), budget, stored-atTerm, stoppedSummary(stopped),
		behind, made, made-before, ready.Round(time.Millisecond), len(second), len(want))
}

// lastStates is the last message of every object in msgs that is not
// deleted at the end.
func lastStates(msgs []*wire.Message) map[string]*wire.Message {
	out := map[string]*wire.Message{}
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

// freezable is a bus that can be frozen: it stays connected, answers
// what it had read, and takes nothing more, so that a bridge's publishes
// and its close wait on it until they give up.
type freezable interface {
	// freezable returns the configuration env of a bridge, changed where
	// it must be for the bus to freeze under it, with freeze and thaw.
	// After thaw, a bridge configured by env publishes to the bus again.
	freezable(t *testing.T, env map[string]string) (frozenEnv map[string]string, freeze, thaw func())
}

// A NATS server freezes behind a proxy that holds what the bridge sends;
// the server's answers to what it had still come. A bridge configured by
// env connects to the server itself, never frozen.
func (b *natsBus) freezable(t *testing.T, env map[string]string) (map[string]string, func(), func()) {
	px := startCutProxy(t, strings.TrimPrefix(b.srv.URL(), "nats://"))
	frozen := maps.Clone(env)
	frozen["BRIDGE_NATS_URL"] = "nats://" + px.addr
	return frozen, px.holdRequests, func() {}
}

// A Kafka cluster freezes by reading produce requests and never
// answering them; every other request is answered.
func (b *kafkaBus) freezable(t *testing.T, env map[string]string) (map[string]string, func(), func()) {
	var frozen atomic.Bool
	b.c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.c.KeepControl()
		return nil, nil, frozen.Load()
	})
	return env, func() { frozen.Store(true) }, func() { frozen.Store(false) }
}

// busHoldsState reports whether b, configured by env, keeps each object's
// latest message (a state layout): the bridge then reads it as the record
// of what was published.
func busHoldsState(b bus, env map[string]string) bool {
	switch b.name() {
	case "nats":
		return env["BRIDGE_NATS_LAYOUT"] == "state"
	default:
		return env["BRIDGE_KAFKA_LAYOUT"] != "history"
	}
}
