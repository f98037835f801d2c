package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// bootstrapObjects is how many ConfigMaps the bootstrap test writes.
const bootstrapObjects = 300

// createConfigMaps creates n ConfigMaps cm-000... in ns.
func createConfigMaps(t *testing.T, ns string, n int) {
	t.Helper()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"n": "0"}}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// changeConfigMaps updates cm-000..cm-(n-1) of ns, deletes the next n, and
// creates n new ones (new-000...).
func changeConfigMaps(t *testing.T, ns string, n int) {
	t.Helper()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	for i := range n {
		cm, err := cms.Get(t.Context(), fmt.Sprintf("cm-%03d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"n": "1"}
		if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(t.Context(), fmt.Sprintf("cm-%03d", n+i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		add := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%03d", i)}}
		if _, err := cms.Create(t.Context(), add, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 12, acceptance 1: 300 ConfigMaps are published, the bridge stops,
// and every message grows older than a history layout keeps messages (a
// few seconds here, standing for the default week): a second bridge with
// the history layout, fed the same objects at the same time, is left with
// nothing. A fresh informer then reads the whole state from the state
// layout alone, equal to LIST (keys, uids, API resourceVersions).
func TestBootstrapFromStateAfterHistoryHorizon(t *testing.T) {
	t.Run("nats", func(t *testing.T) {
		srv := natstest.Start(t, natstest.Options{})
		ns := namespace(t, "boot-nats")
		createConfigMaps(t, ns, bootstrapObjects)
		state := natsEnv(srv, ns, map[string]string{"BRIDGE_CHECKPOINT": "nats-kv:ckpt-" + ns, "BRIDGE_NATS_LAYOUT": "state"})
		history := natsEnv(srv, ns, map[string]string{
			"BRIDGE_CHECKPOINT":            "nats-kv:ckpt-hist-" + ns,
			"BRIDGE_NATS_LAYOUT":           "history",
			"BRIDGE_NATS_STREAM":           "HISTORY",
			"BRIDGE_NATS_SUBJECT_PREFIX":   "hist",
			"BRIDGE_NATS_STREAM_MAX_AGE":   "3s",
			"BRIDGE_NATS_DUPLICATE_WINDOW": "1s",
		})
		out := filepath.Join(t.TempDir(), "stdout")
		ps := startProc(t, procEnv(state), out)
		ph := startProc(t, procEnv(history), out)
		nc := srv.Conn(t)
		stateFilter := natsStateSubjects(ns)
		histFilter := "hist.e2e." + wire.CoreGroupToken + ".v1.configmaps." + wire.EscapeToken(ns) + ".>"
		poll.Until(t, time.Minute, func() (bool, string) {
			s, h := natsCount(t, nc, "KUBE", stateFilter), natsCount(t, nc, "HISTORY", histFilter)
			return s == bootstrapObjects && h == bootstrapObjects, fmt.Sprintf("state stream holds %d, history stream %d of %d", s, h, bootstrapObjects)
		})
		if code := ps.terminate(t); code != 0 {
			t.Fatalf("state bridge exited %d", code)
		}
		if code := ph.terminate(t); code != 0 {
			t.Fatalf("history bridge exited %d", code)
		}
		// The history layout's horizon passes: it keeps nothing.
		poll.Until(t, time.Minute, func() (bool, string) {
			h := natsCount(t, nc, "HISTORY", histFilter)
			return h == 0, fmt.Sprintf("history stream still holds %d messages", h)
		})
		if s := natsCount(t, nc, "KUBE", stateFilter); s != bootstrapObjects {
			t.Fatalf("past the history horizon the state stream holds %d messages, want %d", s, bootstrapObjects)
		}
		i := startInformer(t, natsInformers(srv), "boot-nats", ns, "")
		if d := diffState(i.cached(), listed(t, ns)); d != "" {
			t.Fatalf("a fresh informer from the state stream differs from LIST: %s", d)
		}
		i.checkHandlers(t)
		if s := i.lw.Stats(); s.BusLists != 1 {
			t.Errorf("bus lists = %d, want 1", s.BusLists)
		}
	})
	t.Run("kafka", func(t *testing.T) {
		// Topics created with the broker's defaults (the history layout)
		// keep records for three seconds, standing for the week.
		c := kafkatest.Start(t, kafkatest.WithBrokerConfigs(map[string]string{"log.retention.ms": "3000"}))
		ns := namespace(t, "boot-kafka")
		createConfigMaps(t, ns, bootstrapObjects)
		env := func(prefix, layout string) []string {
			return procEnv(kafkaEnv(c,
				"BRIDGE_RESOURCES", "configmaps",
				"BRIDGE_NAMESPACES", ns,
				"BRIDGE_CLUSTER_NAME", "e2e",
				"BRIDGE_KAFKA_TOPIC_PREFIX", prefix,
				"BRIDGE_KAFKA_LAYOUT", layout,
				"BRIDGE_CHECKPOINT", "file:"+filepath.Join(t.TempDir(), "ckpt.db")))
		}
		out := filepath.Join(t.TempDir(), "stdout")
		ps := startProc(t, env("kube-"+ns, "state"), out)
		ph := startProc(t, env("hist-"+ns, "history"), out)
		stateTopic, histTopic := "kube-"+ns+".configmaps", "hist-"+ns+".configmaps"
		poll.Until(t, time.Minute, func() (bool, string) {
			s, h := len(c.ReadAll(stateTopic)), len(c.ReadAll(histTopic))
			return s == bootstrapObjects && h == bootstrapObjects, fmt.Sprintf("state topic holds %d records, history topic %d of %d", s, h, bootstrapObjects)
		})
		if code := ps.terminate(t); code != 0 {
			t.Fatalf("state bridge exited %d", code)
		}
		if code := ph.terminate(t); code != 0 {
			t.Fatalf("history bridge exited %d", code)
		}
		poll.Until(t, time.Minute, func() (bool, string) {
			c.Compact() // the broker's cleaner, run now
			h := len(c.ReadAll(histTopic))
			return h == 0, fmt.Sprintf("history topic still holds %d records", h)
		})
		if s := len(c.ReadAll(stateTopic)); s != bootstrapObjects {
			t.Fatalf("past the history horizon the state topic holds %d records, want %d", s, bootstrapObjects)
		}
		i := startInformer(t, kafkaInformers(c, "kube-"+ns), "boot-kafka", ns, "")
		if d := diffState(i.cached(), listed(t, ns)); d != "" {
			t.Fatalf("a fresh informer from the state topic differs from LIST: %s", d)
		}
		i.checkHandlers(t)
		if s := i.lw.Stats(); s.BusLists != 1 {
			t.Errorf("bus lists = %d, want 1", s.BusLists)
		}
	})
}

// Issue 12, acceptance 2: during a minute of creates, updates and deletes,
// with the bridges (one per bus) killed with SIGKILL twice and restarted,
// three informers (NATS, Kafka, and a second NATS one started in the middle
// of the churn) equal the API server's LIST within 5 s of the churn's end;
// their handlers never see an object go backwards, nor a delete of an
// object they were never given.
func TestInformersConvergeUnderChurn(t *testing.T) {
	const (
		churn   = 60 * time.Second
		objects = 300
	)
	srv := natstest.Start(t, natstest.Options{})
	c := kafkatest.Start(t)
	ns := namespace(t, "informer-churn")
	natsEnviron := procEnv(natsEnv(srv, ns, map[string]string{"BRIDGE_CHECKPOINT": "nats-kv:ckpt-" + ns, "BRIDGE_CHECKPOINT_INTERVAL": "500ms", "BRIDGE_NATS_LAYOUT": "state"}))
	kafkaEnviron := procEnv(kafkaEnv(c,
		"BRIDGE_RESOURCES", "configmaps",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CLUSTER_NAME", "e2e",
		"BRIDGE_KAFKA_TOPIC_PREFIX", "kube-"+ns,
		"BRIDGE_CHECKPOINT", "kafka:ckpt-"+ns,
		"BRIDGE_CHECKPOINT_INTERVAL", "500ms"))
	out := filepath.Join(t.TempDir(), "stdout")
	pn := startProc(t, natsEnviron, out)
	pk := startProc(t, kafkaEnviron, out)

	in1 := startInformer(t, natsInformers(srv), "nats-1", ns, "")
	ik := startInformer(t, kafkaInformers(c, "kube-"+ns), "kafka-1", ns, "")
	w := startChurners(t, ns, objects, 3, 12)
	began := time.Now()
	var in2 *busInformer
	for _, at := range []time.Duration{churn / 3, churn / 2, 2 * churn / 3} {
		time.Sleep(time.Until(began.Add(at)))
		if at == churn/2 {
			in2 = startInformer(t, natsInformers(srv), "nats-2", ns, "")
			continue
		}
		pn.kill(t)
		pk.kill(t)
		pn = startProc(t, natsEnviron, out)
		pk = startProc(t, kafkaEnviron, out)
	}
	time.Sleep(time.Until(began.Add(churn)))
	made := w.stop()
	stopped := time.Now()
	for _, i := range []*busInformer{in1, ik, in2} {
		i.waitEqualsList(t, ns, 5*time.Second-time.Since(stopped))
	}
	t.Logf("%d changes in %s; all three informers equal LIST %s after the churn stopped", made, churn, time.Since(stopped).Round(time.Millisecond))
	for _, i := range []*busInformer{in1, ik, in2} {
		i.checkHandlers(t)
		s := i.lw.Stats()
		t.Logf("%s: %d handler events; stats %+v", i.name, i.events, s)
	}
}

// Issue 12, acceptance 3: an informer stopped and started again (a new
// process would do the same: a new ListerWatcher on the same snapshot
// file) resumes from its last position without reading the state from the
// bus again, and ends equal to LIST.
func TestInformerResumesWithoutRelist(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "informer-resume-"+b.name())
		p := startProc(t, procEnv(stateEnv(b, ns)), filepath.Join(t.TempDir(), "stdout"))
		defer p.terminate(t)
		createConfigMaps(t, ns, 60)
		snapshot := filepath.Join(t.TempDir(), "informer.db")
		ic := informersOf(b, ns)
		first := startInformer(t, ic, "first", ns, snapshot)
		first.waitEqualsList(t, ns, 30*time.Second)
		first.stop(t)
		first.checkHandlers(t)

		changeConfigMaps(t, ns, 10)
		second := startInformer(t, ic, "second", ns, snapshot)
		second.waitEqualsList(t, ns, 30*time.Second)
		second.checkHandlers(t)
		s := second.lw.Stats()
		if s.SnapshotLists != 1 || s.BusLists != 0 {
			t.Errorf("restarted informer: %d lists from its snapshot, %d from the bus; want 1 and 0", s.SnapshotLists, s.BusLists)
		}
	})
}

// Issue 12, acceptance 4: an informer whose position the bus no longer
// holds (a delete after it expired from NATS, or was compacted away in
// Kafka) is told so with 410 Gone, reads the state from the bus again, and
// ends equal to LIST.
func TestInformerPositionExpired(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "informer-expired-"+b.name())
		env := stateEnv(b, ns)
		env["BRIDGE_NATS_DELETE_TTL"] = "2s"
		env["BRIDGE_KAFKA_DELETE_RETENTION"] = "2s"
		if b.name() == "nats" {
			delete(env, "BRIDGE_KAFKA_DELETE_RETENTION")
		} else {
			delete(env, "BRIDGE_NATS_DELETE_TTL")
			// One partition, so that one later record follows every
			// tombstone: the broker never compacts a partition's last
			// batch.
			env["BRIDGE_KAFKA_PARTITIONS"] = "1"
		}
		p := startProc(t, procEnv(env), filepath.Join(t.TempDir(), "stdout"))
		defer p.terminate(t)
		createConfigMaps(t, ns, 40)
		snapshot := filepath.Join(t.TempDir(), "informer.db")
		ic := informersOf(b, ns)
		first := startInformer(t, ic, "first", ns, snapshot)
		first.waitEqualsList(t, ns, 30*time.Second)
		first.stop(t)

		// Delete ten objects and wait until the bus has let their deletes
		// go.
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for i := range 10 {
			if err := cms.Delete(t.Context(), fmt.Sprintf("cm-%03d", i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitDeletesGone(t, b, ns, 30, 10)

		second := startInformer(t, ic, "second", ns, snapshot)
		second.waitEqualsList(t, ns, 30*time.Second)
		second.checkHandlers(t)
		s := second.lw.Stats()
		if s.Expired == 0 || s.BusLists != 1 || s.SnapshotLists != 0 {
			t.Errorf("informer past an expired position: %d expired, %d bus lists, %d snapshot lists; want ≥1, 1 and 0", s.Expired, s.BusLists, s.SnapshotLists)
		}
	})
}

// stateEnv is b's bridge environment for ns with the state layout.
func stateEnv(b bus, ns string) map[string]string {
	env := b.env(ns)
	if b.name() == "nats" {
		env["BRIDGE_NATS_LAYOUT"] = "state"
	} else {
		env["BRIDGE_KAFKA_LAYOUT"] = "state"
	}
	return env
}

// informersOf reads b's state layout, as stateEnv configures it.
func informersOf(b bus, ns string) informerConfig {
	switch b := b.(type) {
	case *natsBus:
		return natsInformers(b.srv)
	case *kafkaBus:
		return kafkaInformers(b.c, "kube-"+ns)
	}
	panic(fmt.Sprintf("no informers for bus %T", b))
}

// waitDeletesGone waits until the bus holds exactly live objects' records
// for ns, once deleted objects were deleted: on NATS, the deletes' messages expired; on Kafka, compaction
// dropped the deleted keys (a later record is written first, as the
// broker never compacts the last batch).
func waitDeletesGone(t *testing.T, b bus, ns string, live, deleted int) {
	t.Helper()
	switch b := b.(type) {
	case *natsBus:
		nc := b.srv.Conn(t)
		filter := natsStateSubjects(ns)
		poll.Until(t, time.Minute, func() (bool, string) {
			n := natsCount(t, nc, "KUBE", filter)
			return n == uint64(live), fmt.Sprintf("stream holds %d messages for %d live objects", n, live)
		})
	case *kafkaBus:
		topic := "kube-" + ns + ".configmaps"
		poll.Until(t, time.Minute, func() (bool, string) {
			recs := b.records(t, ns)
			tombstones := 0
			for _, r := range recs {
				if r.msg == nil {
					tombstones++
				}
			}
			return tombstones == deleted, fmt.Sprintf("%d of %d tombstones published", tombstones, deleted)
		})
		// A later batch, so that the deletes' are not the last.
		createConfigMap(t, ns, "later")
		poll.Until(t, time.Minute, func() (bool, string) {
			b.c.Compact()
			keys := map[string]bool{}
			for _, r := range b.records(t, ns) {
				keys[r.key] = true
			}
			return len(keys) == live+1, fmt.Sprintf("topic %s holds records of %d keys, want %d", topic, len(keys), live+1)
		})
	}
}

// createConfigMap creates one ConfigMap named name in ns.
func createConfigMap(t *testing.T, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
