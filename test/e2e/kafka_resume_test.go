package e2e

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/internal/config"
)

// checkKafkaResume checks, after TestResumeAfterDowntime's scenario on a
// Kafka bus (acceptance 5: the checkpoint in a Kafka topic), that the
// second run followed each delete with its tombstone, that the checkpoint
// topic is compacted and describes every live object, and that after
// compaction it holds one record per live object. before counts each
// object's events after the first run; want is the changes made while the
// bridge was down.
func checkKafkaResume(t *testing.T, b *kafkaBus, ns string, env map[string]string, firstRun map[string]int, want map[string]change) {
	t.Helper()
	ctx := t.Context()
	c := b.c
	cpTopic := strings.TrimPrefix(env["BRIDGE_CHECKPOINT"], "kafka:")
	if got := c.TopicConfig(cpTopic, "cleanup.policy"); got != "compact" {
		t.Errorf("checkpoint topic: cleanup.policy %q, want compact", got)
	}

	// What the second run published, tombstones included: each key's
	// records past the first run's events (the first run made no
	// tombstones).
	tombstones := 0
	for key, seq := range recordsByKey(b.records(t, ns)) {
		seq = seq[min(firstRun[key], len(seq)):]
		for i, r := range seq {
			if r.msg != nil {
				continue
			}
			tombstones++
			if i == 0 || seq[i-1].msg == nil || seq[i-1].msg.Action != "deleted" {
				t.Errorf("%s: tombstone that does not follow its delete", key)
			}
		}
		if w, ok := want[key]; ok && w.action == "deleted" && (len(seq) == 0 || seq[len(seq)-1].msg != nil) {
			t.Errorf("%s: deleted without a tombstone after", key)
		}
	}
	if tombstones != 5 {
		t.Errorf("after restart: %d tombstones, want exactly 5", tombstones)
	}
	cms := kube(t).CoreV1().ConfigMaps(ns)

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
