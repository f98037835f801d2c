package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/test/kafkatest"
)

// Acceptance 5: with the checkpoint in a Kafka topic, the restart
// scenario of TestResumeAfterDowntime (update 5, delete 5, create 5 while
// the bridge is down) publishes exactly those 15 changes, plus a tombstone
// per delete. The checkpoint topic then describes every live object, and
// after compaction it holds one record per live object.
func TestKafkaCheckpointResume(t *testing.T) {
	ns := namespace(t, "kafka-resume")
	c := kafkatest.Start(t)
	const cpTopic = "bridge-checkpoint"
	env := kafkaEnv(c,
		"BRIDGE_RESOURCES", "configmaps",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CHECKPOINT", "kafka:"+cpTopic,
	)
	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)

	b := startBridge(t, env, nil)
	for i := range 20 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		n := len(c.ReadAll("kube.configmaps"))
		return n >= 20, fmt.Sprintf("%d of 20 records", n)
	})
	b.stop(t)
	if n := len(c.ReadAll("kube.configmaps")); n != 20 {
		t.Fatalf("first run: %d records, want 20", n)
	}
	firstRun := c.EndOffsets("kube.configmaps")
	if got := c.TopicConfig(cpTopic, "cleanup.policy"); got != "compact" {
		t.Errorf("checkpoint topic: cleanup.policy %q, want compact", got)
	}

	// While the bridge is down.
	want := map[string]struct{ action, rv string }{}
	for i := range 5 {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[ns+"/"+name] = struct{ action, rv string }{"updated", got.ResourceVersion}
	}
	for i := 5; i < 10; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want[ns+"/"+name] = struct{ action, rv string }{"deleted", cm.ResourceVersion}
	}
	for i := 20; i < 25; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[ns+"/"+name] = struct{ action, rv string }{"added", got.ResourceVersion}
	}

	b = startBridge(t, env, nil) // returns once the initial diff is published
	b.stop(t)

	// What the second run published.
	var second []kafkaRecord
	for _, r := range readTopic(t, c, "kube.configmaps") {
		if r.offset >= firstRun[r.partition] {
			second = append(second, r)
		}
	}
	events, tombstones := 0, 0
	for key, seq := range recordsByKey(second) {
		w, ok := want[key]
		for i, r := range seq {
			if r.msg == nil {
				tombstones++
				if i == 0 || seq[i-1].msg == nil || seq[i-1].msg.Action != "deleted" {
					t.Errorf("%s: tombstone that does not follow its delete", key)
				}
				continue
			}
			events++
			switch {
			case !ok:
				t.Errorf("unexpected %s of unchanged %s at %s", r.msg.Action, key, r.msg.ResourceVersion)
			case !sameChange(r.msg, w.action, w.rv):
				t.Errorf("%s: %s at %s, want %s at %s", key, r.msg.Action, r.msg.ResourceVersion, w.action, w.rv)
			case !r.msg.Snapshot:
				t.Errorf("%s: snapshot=false, want true", key)
			}
		}
		delete(want, key)
	}
	for key, w := range want {
		t.Errorf("missing %s of %s", w.action, key)
	}
	if events != 15 || tombstones != 5 {
		t.Errorf("after restart: %d events and %d tombstones, want exactly 15 and 5", events, tombstones)
	}
	t.Logf("second run published %d events and %d tombstones", events, tombstones)

	// The checkpoint holds every live object at its current state.
	live, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=kafka", "BRIDGE_KAFKA_BROKERS=" + env["BRIDGE_KAFKA_BROKERS"]})
	if err != nil {
		t.Fatal(err)
	}
	store := openKafkaStore(t, cfg, cpTopic)
	snap, err := store.Load(ctx, "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	liveKeys := map[string]checkpoint.Position{}
	for _, cm := range live.Items {
		liveKeys[ns+"/"+cm.Name] = checkpoint.Position{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	}
	if len(snap.Objects) != len(liveKeys) || len(liveKeys) != 20 {
		t.Errorf("checkpoint holds %d objects, %d are live; want 20 of each", len(snap.Objects), len(liveKeys))
	}
	for key, pos := range liveKeys {
		if snap.Objects[key] != pos {
			t.Errorf("checkpoint of %s: %+v, want %+v", key, snap.Objects[key], pos)
		}
	}

	// Compaction: make the tombstones expire at once (as they do after
	// delete.retention.ms), then close the newest batch, which compaction
	// never touches (Kafka's active segment), with a commit of another
	// resource.
	c.SetTopicConfig(cpTopic, "delete.retention.ms", "0")
	if err := store.Commit(ctx, []checkpoint.Record{{Resource: "e2e-closing", Key: "x", Position: checkpoint.Position{UID: "u", ResourceVersion: "1"}}}); err != nil {
		t.Fatal(err)
	}
	before := len(c.ReadAll(cpTopic))
	c.Compact()
	objects, resources, other := map[string]int{}, 0, 0
	after := c.ReadAll(cpTopic)
	for _, r := range after {
		key := string(r.Key)
		obj, isObject := strings.CutPrefix(key, "configmaps/")
		switch {
		case key == "configmaps":
			resources++
		case isObject:
			if r.Value == nil {
				t.Errorf("tombstone of %s left after compaction", obj)
			}
			objects[obj]++
		default:
			other++
		}
	}
	t.Logf("checkpoint topic: %d records before compaction, %d after (%d objects, %d resource records, %d others)",
		before, len(after), len(objects), resources, other)
	if len(objects) != 20 || resources != 1 {
		t.Errorf("after compaction: records of %d objects and %d of the resource, want 20 and 1", len(objects), resources)
	}
	for key, n := range objects {
		if _, ok := liveKeys[key]; !ok || n != 1 {
			t.Errorf("after compaction: %d records of %s (live: %v), want one per live object", n, key, ok)
		}
	}
}

func openKafkaStore(t *testing.T, cfg *config.Config, topic string) *kafkastore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := kafkastore.Open(ctx, cfg.KafkaSettings().Conn(), topic, cfg.KafkaCheckpoint(), slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
