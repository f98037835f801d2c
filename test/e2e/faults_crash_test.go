package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/wire"
)

// The crash loop's figures.
const (
	// crashObjects is how many ConfigMaps the writers churn.
	crashObjects = 300
	// crashKills is how many times the bridge is killed.
	crashKills = 12
	// crashMostMessages bounds the new messages a run publishes before it
	// is killed; a quarter of the runs are killed as soon as they are
	// ready, right after publishing what their restart diff found.
	crashMostMessages = 300
	crashSeed         = 5
)

// crashRecord is what the test knew when it killed the bridge.
type crashRecord struct {
	at        time.Time           // the killed process was gone by then
	ran       int                 // messages the bus gained during the killed run
	published int                 // messages on the bus at the kill
	ckpt      checkpoint.Snapshot // the checkpoint the next run started from
	ready     time.Duration       // how long the next run took to be ready
}

// Issue 5, crash loop: while writers churn a few hundred ConfigMaps, the
// bridge is killed with SIGKILL at random moments and started again, a
// dozen times. Afterwards the bus's view equals the API server's LIST, no
// object's resourceVersion goes backwards, and whatever a restart
// published again was acknowledged before the kill but not yet in the
// checkpoint the restart read. JetStream stores no repeat at all
// (Nats-Msg-Id); Kafka stores those repeats.
func TestFaultCrashLoop(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "fault-crash-"+b.name())
		env := maps.Clone(b.env(ns))
		// Short, so that kills land both just before and just after
		// flushes.
		env["BRIDGE_CHECKPOINT_INTERVAL"] = "500ms"
		environ := procEnv(env)
		out := filepath.Join(t.TempDir(), "stdout") // the bus is the sink: stays empty
		probe := newBusProbe(t, b, ns)
		rng := rand.New(rand.NewPCG(crashSeed, 1))
		began := time.Now()

		p := startProc(t, environ, out)
		w := startChurners(t, ns, crashObjects, 2, crashSeed)
		var crashes []crashRecord
		seen := probe.count()
		for i := range crashKills {
			want := 0
			if rng.IntN(4) > 0 {
				want = 1 + rng.IntN(crashMostMessages)
			}
			probe.waitGrown(t, seen, want, fmt.Sprintf("before kill %d", i+1))
			p.kill(t)
			c := crashRecord{at: time.Now()}
			c.published = probe.count()
			c.ran = c.published - seen
			c.ckpt = readCheckpoint(t, b, ns)
			restarted := time.Now()
			p = startProc(t, environ, out)
			c.ready = time.Since(restarted)
			crashes = append(crashes, c)
			seen = probe.count()
		}
		made := w.stop()
		stopped := time.Now()
		v, msgs := settleOracle(t, b, ns, probe, 15*time.Second)
		settled := time.Since(stopped)
		if code := p.terminate(t); code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		ends := make([]time.Time, len(crashes))
		for i, c := range crashes {
			ends[i] = c.at
		}
		if v.mismatch != "" {
			t.Errorf("the view does not converge on the LIST: %s%s", v.mismatch, explainMismatch(t, ns, msgs, ends))
		}
		msgs = b.read(t, ns) // everything, including what the last run published on its way out
		v = oracle(t, ns, msgs)
		if len(v.backwards) > 0 {
			t.Errorf("%d resourceVersions went backwards: %s", len(v.backwards), strings.Join(v.backwards, "; "))
		}
		rep := analyseCrashRepeats(t, msgs, crashes, ends)
		for i, c := range crashes {
			t.Logf("%s crash %2d: killed %3d messages into its run (%4d on the bus); checkpoint held %3d objects, %3d published past it; "+
				"restart ready in %4s; repeated after restart: %d ids, %d (key, resourceVersion) under a new id",
				b.name(), i+1, c.ran, c.published, len(c.ckpt.Objects), rep.unflushed[i], c.ready.Round(time.Millisecond),
				rep.ids[i], rep.states[i])
		}
		total, states := 0, 0
		for i := range crashes {
			total += rep.ids[i]
			states += rep.states[i]
		}
		t.Logf("%s: %d kills in %s; %d changes made, %d events on the bus, %d repeated ids (oracle: %d duplicates), %d states repeated under a new id; "+
			"the oracle's last look at the view came %s after the writers stopped",
			b.name(), len(crashes), time.Since(began).Round(time.Millisecond), made, v.events, total, v.duplicates,
			states, settled.Round(time.Millisecond))

		if total != v.duplicates {
			t.Errorf("repeats counted per crash (%d) differ from the oracle's duplicates (%d)", total, v.duplicates)
		}
		if b.name() == "nats" && v.duplicates != 0 {
			t.Errorf("JetStream stored %d duplicates, want 0: every repeat carries the Nats-Msg-Id of its first copy", v.duplicates)
		}
	})
}

// crashRepeats is what the restarts published again, per crash.
type crashRepeats struct {
	// ids counts messages whose event id was published by an earlier run.
	ids []int
	// states counts messages that carry an object's key and
	// resourceVersion published by an earlier run, under another id: an
	// added found by the diff where the watch had said updated, or a
	// delete of an old incarnation at the new one's resourceVersion.
	states []int
	// unflushed counts objects whose newest state published before the
	// kill was not in the checkpoint: the most a restart can repeat.
	unflushed []int
}

// analyseCrashRepeats attributes every message of msgs to the run that
// published it (by the time it was observed; see runOfMsg), and checks
// that every message published again after a crash is one the checkpoint
// read after that crash did not cover, and the newest state of its object
// published before the crash. A repeat within one run fails the test: no
// broker fault happens in the crash loop.
func analyseCrashRepeats(t *testing.T, msgs []*wire.Message, crashes []crashRecord, ends []time.Time) crashRepeats {
	t.Helper()
	rep := crashRepeats{ids: make([]int, len(crashes)), states: make([]int, len(crashes)), unflushed: make([]int, len(crashes))}

	type first struct {
		m   *wire.Message
		run int
	}
	byID := map[string]first{}
	byState := map[keyRV]first{}
	byUID := map[string][]first{} // an object's messages, in stream order
	runs := make([]int, len(msgs))
	for i, m := range msgs {
		runs[i] = runOfMsg(m, ends)
		byUID[m.UID] = append(byUID[m.UID], first{m, runs[i]})
	}
	// newest is the newest state of an object published before kill k.
	newest := func(uid string, k int) *wire.Message {
		var out *wire.Message
		for _, f := range byUID[uid] {
			if f.run <= k && (out == nil || !rvLess(f.m.ResourceVersion, out.ResourceVersion)) {
				out = f.m
			}
		}
		return out
	}

	for i, m := range msgs {
		run := runs[i]
		state := keyRV{m.Key(), m.ResourceVersion}
		f, repeated := byID[m.ID]
		switch {
		case !repeated:
			byID[m.ID] = first{m, run}
		case f.run == run:
			t.Errorf("%s published twice by run %d (no crash in between)", describeMsg(m), run)
		default:
			k := run - 1 // the kill that preceded the repeat
			rep.ids[k]++
			byID[m.ID] = first{m, run}
			if ckptCovers(crashes[k].ckpt, f.m) {
				t.Errorf("crash %d: %s was in the checkpoint (%+v) and still published again by the restart",
					k+1, describeMsg(m), crashes[k].ckpt.Objects[m.Key()])
			}
			if n := newest(m.UID, k); n.ResourceVersion != m.ResourceVersion {
				t.Errorf("crash %d: the restart published %s again, though %s was published after it before the kill",
					k+1, describeMsg(m), describeMsg(n))
			}
			continue
		}
		if s, ok := byState[state]; ok && s.m.ID != m.ID && s.run < run {
			k := run - 1
			rep.states[k]++
			if ckptCovers(crashes[k].ckpt, s.m) {
				t.Errorf("crash %d: %s repeats the state of %s, which was in the checkpoint (%+v)",
					k+1, describeMsg(m), describeMsg(s.m), crashes[k].ckpt.Objects[m.Key()])
			}
		}
		if _, ok := byState[state]; !ok {
			byState[state] = first{m, run}
		}
	}

	for k, c := range crashes {
		for uid := range byUID {
			if n := newest(uid, k); n != nil && !ckptCovers(c.ckpt, n) {
				rep.unflushed[k]++
			}
		}
		if rep.ids[k] > rep.unflushed[k] {
			t.Errorf("crash %d: %d repeats, more than the %d objects published after the last checkpoint flush",
				k+1, rep.ids[k], rep.unflushed[k])
		}
	}
	return rep
}

// What the crash loop found, each case made deterministic. A run whose
// periodic checkpoint flush never comes publishes some changes and is
// killed; more changes may follow while it is down; the restart must bring
// the bus's view to the LIST. With only delivered positions in the
// checkpoint (commit 062b747), both cases fail:
//
//   - "recreated": the object was checkpointed; it is deleted and created
//     again under a new uid, and both are published before the kill. The
//     restart finds the old uid in the checkpoint and the new one in the
//     list, and publishes "deleted" for the old uid, then "added" for the
//     new one (README, "How restart works"). That "added" has the id of
//     the one published before the kill, so JetStream drops it as a
//     duplicate, and the stream ends with the delete: a consumer that
//     applies deletes by key loses the object.
//   - "created, then deleted while down": the object is created and
//     published before the kill, and deleted while the bridge is down.
//     Neither the checkpoint nor the list has it, so the restart publishes
//     nothing, and the bus's last word on it is "added".
func TestFaultCrashUnflushed(t *testing.T) {
	type step func(t *testing.T, cms typedcorev1.ConfigMapInterface)
	create := func(t *testing.T, cms typedcorev1.ConfigMapInterface) {
		if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(t *testing.T, cms typedcorev1.ConfigMapInterface) {
		if err := cms.Delete(t.Context(), "cm", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name         string
		checkpointed []step // by a first run, stopped gracefully
		unflushed    []step // published by a run killed before its periodic flush
		down         []step // while the bridge is down
	}{
		{name: "recreated", checkpointed: []step{create}, unflushed: []step{remove, create}},
		{name: "created, then deleted while down", unflushed: []step{create}, down: []step{remove}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachBus(t, func(t *testing.T, b bus) {
				ns := namespace(t, "fault-unflushed-"+b.name())
				env := maps.Clone(b.env(ns))
				out := filepath.Join(t.TempDir(), "stdout")
				probe := newBusProbe(t, b, ns)
				cms := kube(t).CoreV1().ConfigMaps(ns)
				var ends []time.Time
				converge := func(when string) {
					t.Helper()
					if v, msgs := settleOracle(t, b, ns, probe, 30*time.Second); v.mismatch != "" {
						t.Fatalf("%s: the view differs from the LIST: %s%s", when, v.mismatch, explainMismatch(t, ns, msgs, ends))
					}
				}

				before := checkpoint.Snapshot{Objects: map[string]checkpoint.Position{}}
				if len(c.checkpointed) > 0 {
					p := startProc(t, procEnv(env), out)
					for _, s := range c.checkpointed {
						s(t, cms)
					}
					converge("first run")
					if code := p.terminate(t); code != 0 {
						t.Fatalf("exit code %d after SIGTERM, want 0", code)
					}
					ends = append(ends, time.Now())
					before = readCheckpoint(t, b, ns)
				}

				env["BRIDGE_CHECKPOINT_INTERVAL"] = "1h" // no periodic flush within the test
				p := startProc(t, procEnv(env), out)
				for _, s := range c.unflushed {
					s(t, cms)
				}
				converge("before the kill")
				p.kill(t)
				ends = append(ends, time.Now())
				// The premise: the killed run checkpointed no state it
				// delivered. (A position without a resourceVersion is no
				// delivered state.)
				after := readCheckpoint(t, b, ns)
				for key, pos := range after.Objects {
					if pos.ResourceVersion != "" && pos != before.Objects[key] {
						t.Fatalf("the killed run checkpointed what it delivered: %s at %+v, before it %+v", key, pos, before.Objects[key])
					}
				}
				for _, s := range c.down {
					s(t, cms)
				}

				p = startProc(t, procEnv(env), out)
				v, msgs := settleOracle(t, b, ns, probe, 5*time.Second)
				if code := p.terminate(t); code != 0 {
					t.Errorf("exit code %d after SIGTERM, want 0", code)
				}
				if v.mismatch != "" {
					t.Errorf("after the restart, the view differs from the LIST: %s%s", v.mismatch, explainMismatch(t, ns, msgs, ends))
				}
				if len(v.backwards) > 0 {
					t.Errorf("resourceVersions went backwards: %s", strings.Join(v.backwards, "; "))
				}
			})
		})
	}
}
