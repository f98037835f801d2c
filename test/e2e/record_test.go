package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// The bus is the record: whatever became of the bridge's checkpoint while
// it was down, a restart leaves the bus's state equal to a LIST, and
// publishes exactly the changes made meanwhile.

// TestCheckpointLostWhileDown: a bridge publishes 30 ConfigMaps and
// stops; its checkpoint is lost (the file removed, or the NATS KV bucket
// or Kafka checkpoint topic deleted); 10 objects are deleted, 5 updated
// and 5 created; the bridge starts again. The bus's state must equal a
// LIST, with no object the cluster lacks, and the restart must publish
// the 20 changes and nothing more: the 10 deletes marked reconciled (the
// bus alone knew the objects), no unchanged object again.
func TestCheckpointLostWhileDown(t *testing.T) {
	for _, lost := range []string{"file", "bus"} {
		t.Run(lost, func(t *testing.T) {
			forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
				ns := namespace(t, "lost-"+lost+"-"+b.name())
				env := stateEnv(b, ns)
				file := filepath.Join(t.TempDir(), "checkpoint.db")
				if lost == "file" {
					env["BRIDGE_CHECKPOINT"] = "file:" + file
				}
				loseCheckpoint := func() {
					switch lost {
					case "file":
						if err := os.Remove(file); err != nil {
							t.Fatal(err)
						}
					default:
						deleteBusCheckpoint(t, b, ns)
					}
				}
				checkpointLost(t, b, ns, env, loseCheckpoint)
			})
		})
	}
}

// checkpointLost is the scenario of TestCheckpointLostWhileDown on b.
func checkpointLost(t *testing.T, b bus, ns string, env map[string]string, loseCheckpoint func()) {
	t.Helper()
	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	r := startBridge(t, env, nil)
	for i := range 30 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() (bool, string) { return sameAsList(t, ns, b.read(t, ns)) })
	r.stop(t)
	before := publishedCount(t, b, ns)

	loseCheckpoint()
	for i := range 10 {
		if err := cms.Delete(ctx, fmt.Sprintf("cm-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 15; i++ {
		cm, err := cms.Get(ctx, fmt.Sprintf("cm-%02d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 30; i < 35; i++ {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	r = startBridge(t, env, nil) // ready once the initial diff is published
	r.stop(t)
	if ok, why := sameAsList(t, ns, b.read(t, ns)); !ok {
		t.Errorf("after the restart the bus's state differs from the API server's: %s", why)
	}
	published := publishedCount(t, b, ns) - before
	if published != 20 {
		t.Errorf("the restart published %d events, want the 20 changes made while the bridge was down", published)
	}
	reconciled := 0
	for _, m := range b.read(t, ns) {
		if m.Action == "deleted" && m.Reason == "reconciled" {
			reconciled++
		}
	}
	// NATS deletes stay until their TTL; Kafka keeps every record here.
	if reconciled != 10 {
		t.Errorf("%d deletes marked reconciled, want the 10 objects deleted while the checkpoint was lost", reconciled)
	}
	if !strings.Contains(r.logs.String(), "the checkpoint and the bus disagree") {
		t.Errorf("the restart did not log that the checkpoint and the bus disagreed")
	}
}

// deleteBusCheckpoint deletes the checkpoint b.env(ns) keeps in the bus:
// the NATS KV bucket, or the Kafka topic.
func deleteBusCheckpoint(t *testing.T, b bus, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	switch b := b.(type) {
	case *natsBus:
		if err := b.srv.JetStream(t).DeleteKeyValue(ctx, "ckpt-"+ns); err != nil {
			t.Fatalf("delete the KV bucket: %v", err)
		}
	case *kafkaBus:
		res, err := b.c.Admin().DeleteTopics(ctx, "ckpt-"+ns)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("delete the checkpoint topic: %v", err)
		}
	}
}

// publishedCount is how many events the bus has taken for the ConfigMaps
// of ns so far: on NATS the stream's last sequence (the stream is the
// test's own), on Kafka the events in the topic (tombstones left out).
func publishedCount(t *testing.T, b bus, ns string) int {
	t.Helper()
	switch b := b.(type) {
	case *natsBus:
		return int(natstest.StreamState(t, b.srv.Conn(t), "KUBE").LastSeq)
	case *kafkaBus:
		return len(b.read(t, ns))
	}
	t.Fatalf("no count for bus %T", b)
	return 0
}

// waitDiscoveryPublished waits until the bus holds the discovery document
// of the cluster of b.env: on NATS it shares the stream whose last
// sequence publishedCount reads, so a run killed before publishing it
// would leave it to the next run.
func waitDiscoveryPublished(t *testing.T, b bus) {
	t.Helper()
	nb, ok := b.(*natsBus)
	if !ok {
		return // Kafka: the document has a topic of its own
	}
	subject := wire.DiscoverySubject("kube", "e2e")
	nc := nb.srv.Conn(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return natsCount(t, nc, "KUBE", subject) == 1, "no discovery document on " + subject
	})
}

// TestCRDDeletedWhileDown: a bridge watching everything publishes the 10
// objects of a CRD and stops; the CRD is deleted; the bridge starts
// again. In a state layout the bus is the record, and must hold none of
// the CRD's objects: their deletes are published, marked reconciled, and
// the log names the resource. (Discovery is asked twice before the
// resource counts as gone.) So it must whatever became of the checkpoint
// meanwhile: kept, or lost with the CRD (the second start on a new
// file), when only the bus remembers that the resource was published.
func TestCRDDeletedWhileDown(t *testing.T) {
	for _, lost := range []bool{false, true} {
		name := "checkpoint kept"
		if lost {
			name = "checkpoint lost"
		}
		t.Run(name, func(t *testing.T) {
			forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) { crdDeletedWhileDown(t, b, lost) })
		})
	}
}

func crdDeletedWhileDown(t *testing.T, b bus, checkpointLost bool) {
	suffix := "kept"
	if checkpointLost {
		suffix = "lost"
	}
	// Only the bus's discovery document will tell, with the checkpoint lost.
	p := publishCRDObjects(t, b, "crdgone-"+suffix, "gone-"+suffix, "widgets", "Widget", 10, "*", checkpointLost)

	deleteCRD(t.Context(), t, p.name)
	if checkpointLost {
		p.loseCheckpoint(t)
	}
	r := startBridge(t, p.env, nil)
	r.stop(t)
	if n := p.live(); n != 0 {
		t.Errorf("after a start while %s is gone the bus holds %d of its objects, want none", p.name, n)
	}
	for _, m := range b.readKinds(t, p.ns, []watchedKind{p.kind}) {
		if m.Action == "deleted" && m.Reason != "reconciled" {
			t.Errorf("%s: deleted with reason %q, want reconciled", m.Key(), m.Reason)
		}
	}
	if !loggedFor(r.logs.String(), "resource no longer served", p.name) {
		t.Errorf("the start did not log that %s is no longer served", p.name)
	}
}

// crdObjects are the objects of a CRD that a bridge in a state layout
// published, before it stopped.
type crdObjects struct {
	ns, name string // the namespace, and the resource's name
	gvr      schema.GroupVersionResource
	kind     watchedKind
	env      map[string]string // the bridge's, with a file checkpoint
	b        bus
	t        *testing.T
}

// publishCRDObjects creates a namespaced CRD of group
// "<group>-<bus>.example.com" and n of its objects in the namespace named
// after ns, published by a bridge with BRIDGE_RESOURCES resources ("%s"
// standing for the CRD's resource), which it stops once the bus holds
// them, and with waitDocument once the bus's discovery document names
// the CRD.
func publishCRDObjects(t *testing.T, b bus, ns, group, plural, kind string, n int, resources string, waitDocument bool) *crdObjects {
	t.Helper()
	group += "-" + b.name() + ".example.com"
	p := &crdObjects{ns: namespace(t, ns), name: plural + "." + group, kind: crdKind(group, plural, kind), b: b, t: t}
	p.gvr = createCRDAt(t, group, plural, kind, "Namespaced", "v1")
	p.env = stateEnv(b, p.ns)
	p.env["BRIDGE_RESOURCES"] = strings.ReplaceAll(resources, "%s", p.name)
	p.loseCheckpoint(t)
	r := startBridge(t, p.env, nil)
	createObjects(t, p.gvr, kind, p.ns, strings.ToLower(kind[:1]), n)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		got := p.live()
		return got == n, fmt.Sprintf("%d of %d objects of %s on the bus", got, n, p.name)
	})
	if waitDocument {
		followDiscovery(t, b, p.ns).until(t, "a document with "+p.name, func(d wire.Discovery) bool { return hasResource(d, p.gvr) })
	}
	r.stop(t)
	return p
}

// live is how many of the objects the bus holds live.
func (p *crdObjects) live() int {
	return len(lastStates(p.b.readKinds(p.t, p.ns, []watchedKind{p.kind})))
}

// loseCheckpoint points the bridge at a new file checkpoint.
func (p *crdObjects) loseCheckpoint(t *testing.T) {
	p.env["BRIDGE_CHECKPOINT"] = "file:" + filepath.Join(t.TempDir(), "checkpoint.db")
}

// TestCheckpointLostInHistoryLayout: in the history layout the bus keeps
// no state, and the checkpoint is the only record of what was published.
// A bridge whose bus checkpoint (NATS KV bucket, Kafka topic) was deleted
// while it was down must refuse to start, naming
// BRIDGE_CHECKPOINT_FRESH_START, rather than publish every object again
// and lose the deletes made meanwhile; with it, it starts.
func TestCheckpointLostInHistoryLayout(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "lost-history-"+b.name())
		env := b.env(ns)
		if b.name() == "kafka" {
			env["BRIDGE_KAFKA_LAYOUT"] = "history"
		}
		createConfigMap(t, ns, "a")
		r := startBridge(t, env, nil)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			n := len(b.read(t, ns))
			return n == 1, fmt.Sprintf("%d of 1 messages", n)
		})
		r.stop(t)
		deleteBusCheckpoint(t, b, ns)

		environ := []string{"BRIDGE_CHECKPOINT_INTERVAL=100ms"}
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		cfg, err := config.Load(environ)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err = bridge.New(cfg, cp.RESTConfig(), slog.New(slog.NewTextHandler(t.Output(), nil))).Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "BRIDGE_CHECKPOINT_FRESH_START") {
			t.Fatalf("a start from a lost checkpoint in the history layout: %v; want a refusal naming BRIDGE_CHECKPOINT_FRESH_START", err)
		}
		t.Logf("refused: %v", err)

		env["BRIDGE_CHECKPOINT_FRESH_START"] = "true"
		startBridge(t, env, nil).stop(t)
	})
}

// TestViewCrashRepeatsNothing: with a view (BRIDGE_FILTER and
// BRIDGE_DROP_FIELDS, as the chart's high-availability set has), a bridge
// killed after publishing creations it had not yet checkpointed (their
// intents are durable, their acknowledged positions not) must, on
// restart, publish nothing again: in a state layout the bus tells that
// they were published, and under which view. (Before the bus carried
// the view state, each was published again, dated by the restart's
// revision under a new event id, and stored twice.)
func TestViewCrashRepeatsNothing(t *testing.T) {
	forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
		ns := namespace(t, "viewcrash-"+b.name())
		env := stateEnv(b, ns)
		env["BRIDGE_FILTER"] = `!has(labels.skip)`
		env["BRIDGE_DROP_FIELDS"] = "metadata.annotations"
		env["BRIDGE_CHECKPOINT"] = "file:" + filepath.Join(t.TempDir(), "checkpoint.db")
		env["BRIDGE_CHECKPOINT_INTERVAL"] = "1h"
		env["BRIDGE_METRICS_ADDR"] = ""
		out := filepath.Join(t.TempDir(), "out")
		p := startProc(t, procEnv(env), out)
		for i := range 10 {
			createConfigMap(t, ns, fmt.Sprintf("cm-%02d", i))
		}
		poll.Until(t, 30*time.Second, func() (bool, string) { return sameAsList(t, ns, b.read(t, ns)) })
		waitDiscoveryPublished(t, b)
		before := publishedCount(t, b, ns)
		p.kill(t)

		p = startProc(t, procEnv(env), out) // ready: the first list's changes are published
		p.terminate(t)
		if n := publishedCount(t, b, ns) - before; n != 0 {
			t.Errorf("the restart after a kill published %d events again, want none: the bus held every creation, under the same view", n)
		}
	})
}

// TestResourceNoLongerSelected: a bridge publishes the objects of two
// resources; it is started again with one of them taken out of
// BRIDGE_RESOURCES. In a state layout the bus must hold none of the
// other's objects then: their deletes are published, marked reconciled.
// With the checkpoint lost meanwhile, only the bus's discovery document
// names the resource, and that is not enough to delete the objects of a
// resource the cluster still serves: another bridge of the same cluster
// name may publish them. They are left, and the start says so. If the
// CRD was deleted as well, the cluster lacks them all: they are deleted
// (and, on Kafka, the sink, made for the topics of the resources watched,
// is made again for that resource's topic too).
func TestResourceNoLongerSelected(t *testing.T) {
	for _, c := range []struct {
		name                    string
		checkpointLost, crdGone bool
		wantLive                int
		wantLog                 string
	}{
		{"checkpoint kept", false, false, 0, "resource no longer selected"},
		{"checkpoint lost", true, false, 5, "its objects on the bus are left"},
		{"checkpoint lost, CRD deleted", true, true, 0, "resource no longer served"},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
				resourceNoLongerSelected(t, b, c.checkpointLost, c.crdGone, c.wantLive, c.wantLog)
			})
		})
	}
}

func resourceNoLongerSelected(t *testing.T, b bus, checkpointLost, crdGone bool, wantLive int, wantLog string) {
	suffix := "kept"
	if checkpointLost {
		suffix = "lost"
	}
	if crdGone {
		suffix += "-gone"
	}
	p := publishCRDObjects(t, b, "unselected-"+suffix, "unselected-"+suffix, "gadgets", "Gadget", 5, "configmaps,%s", checkpointLost)

	p.env["BRIDGE_RESOURCES"] = "configmaps"
	if checkpointLost {
		p.loseCheckpoint(t)
	}
	if crdGone {
		deleteCRD(t.Context(), t, p.name)
	}
	r := startBridge(t, p.env, nil)
	r.stop(t)
	if n := p.live(); n != wantLive {
		t.Errorf("after a start without %s the bus holds %d of its objects, want %d", p.name, n, wantLive)
	}
	if !loggedFor(r.logs.String(), wantLog, p.name) {
		t.Errorf("the start did not log %q for %s", wantLog, p.name)
	}
}

// TestOtherBridgesObjectsLeftAlone: two bridges of one cluster share a bus
// and a namespace, each under its own label selector. The second one's
// start, and its passes, find the first one's objects on the bus and not
// in their own lists; the API server holds them, so they are another
// bridge's, and stay: the bus keeps all six objects, and no repair is
// counted.
func TestOtherBridgesObjectsLeftAlone(t *testing.T) {
	forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
		ns := namespace(t, "shared-"+b.name())
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for _, team := range []string{"a", "b"} {
			for i := range 3 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", team, i), Labels: map[string]string{"team": team}}}
				if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		envA := stateEnv(b, ns)
		envA["BRIDGE_LABEL_SELECTOR"] = "team=a"
		envA["BRIDGE_CHECKPOINT"] = "none"
		startBridge(t, envA, nil)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			n := len(lastStates(b.read(t, ns)))
			return n == 3, fmt.Sprintf("%d of team a's 3 objects on the bus", n)
		})

		envB := maps.Clone(envA)
		envB["BRIDGE_LABEL_SELECTOR"] = "team=b"
		envB["BRIDGE_RECONCILE_INTERVAL"] = "1s"
		m := metrics.New()
		r := startBridgeWith(t, envB, bridge.WithMetrics(m))
		poll.Until(t, 30*time.Second, func() (bool, string) {
			runs := seriesOf(t, m, "bridge_reconcile_runs_total", "result")["ok"]
			return runs >= 2, fmt.Sprintf("%v passes of the second bridge", runs)
		})
		if n := len(lastStates(b.read(t, ns))); n != 6 {
			t.Errorf("the bus holds %d live objects, want both bridges' 6", n)
		}
		if got := seriesOf(t, m, "bridge_reconcile_repaired_total", "kind"); len(got) != 0 {
			t.Errorf("the second bridge repaired %v, want nothing: the other objects are another bridge's", got)
		}
		if !strings.Contains(r.logs.String(), "left as they are") {
			t.Errorf("the second bridge did not say it left the other bridge's objects alone")
		}
	})
}
