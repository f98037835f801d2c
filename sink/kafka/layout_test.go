package kafka

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/logtest"
)

// compactionReports collects what New reports to Options.TopicCompaction.
type compactionReports struct {
	mu  sync.Mutex
	got map[string]bool
}

func (r *compactionReports) report(topic string, compacted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string]bool{}
	}
	r.got[topic] = compacted
}

// newLayoutSink starts a sink that reports compaction to r and logs to
// logs as well as the test's output.
func newLayoutSink(t *testing.T, cfg *Parsed, r *compactionReports, logs *logtest.Buffer, resources ...schema.GroupVersionResource) *Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(multiWriter{t.Output(), logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := New(ctx, cfg, resources, Options{TopicCompaction: r.report}, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

type multiWriter [2]interface{ Write([]byte) (int, error) }

func (m multiWriter) Write(p []byte) (int, error) {
	for _, w := range m {
		if _, err := w.Write(p); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// In the state layout the topics the bridge creates are compacted and
// kept for good, deletes' tombstones for BRIDGE_KAFKA_DELETE_RETENTION;
// BRIDGE_KAFKA_TOPIC_CONFIGS adds to that. In the history layout they
// take the broker's defaults.
func TestStateLayoutCreatesCompactedTopics(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want map[string]string // config name: value on the created topic
	}{
		{"defaults", nil, map[string]string{
			"cleanup.policy": "compact", "retention.ms": "-1", "delete.retention.ms": "86400000"}},
		{"delete retention and topic configs", map[string]string{
			"BRIDGE_KAFKA_DELETE_RETENTION": "2m", "BRIDGE_KAFKA_TOPIC_CONFIGS": "cleanup.policy=compact,delete,max.message.bytes=4194304"},
			map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "-1", "delete.retention.ms": "120000", "max.message.bytes": "4194304"}},
		{"history", map[string]string{"BRIDGE_KAFKA_LAYOUT": "history"}, map[string]string{
			// kfake's defaults, as a stock Kafka's: deleted after 7 days.
			"cleanup.policy": "delete", "retention.ms": "604800000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t)
			var r compactionReports
			newLayoutSink(t, clusterConfig(t, c, tt.vars), &r, &logtest.Buffer{}, configmaps, deployments)
			for _, topic := range []string{"kube.configmaps", "kube.deployments.apps"} {
				for name, want := range tt.want {
					if got := c.TopicConfig(topic, name); got != want {
						t.Errorf("%s: %s=%q, want %q", topic, name, got, want)
					}
				}
			}
			want := map[string]bool{"kube.configmaps": true, "kube.deployments.apps": true}
			if tt.vars["BRIDGE_KAFKA_LAYOUT"] == "history" {
				want = nil // nothing to report: history wants no compaction
			}
			if !equalReports(r.got, want) {
				t.Errorf("reported compaction %v, want %v", r.got, want)
			}
		})
	}
}

// An existing topic is used as it is. In the state layout one that is not
// compacted, or also deletes by time, gets a warning naming it and its
// policy, and is reported not compacted (the metric); a compacted one is
// reported compacted, quietly.
func TestStateLayoutWarnsOfTopicsNotCompacted(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic("kube.configmaps", 1, nil) // the broker's default: delete
	c.CreateTopic("kube.deployments.apps", 1, map[string]string{"cleanup.policy": "compact"})
	c.CreateTopic("kube.secrets", 1, map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "3600000"})
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	var r compactionReports
	logs := &logtest.Buffer{}
	newLayoutSink(t, clusterConfig(t, c, nil), &r, logs, configmaps, deployments, secrets)

	want := map[string]bool{"kube.configmaps": false, "kube.deployments.apps": true, "kube.secrets": true}
	if !equalReports(r.got, want) {
		t.Errorf("reported compaction %v, want %v", r.got, want)
	}
	var warnings []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") {
			warnings = append(warnings, line)
		}
	}
	has := func(parts ...string) bool {
		for _, w := range warnings {
			if containsAll(w, parts...) {
				return true
			}
		}
		return false
	}
	if !has("topic is not compacted", "topic=kube.configmaps", "cleanupPolicy=delete", "BRIDGE_KAFKA_LAYOUT=state") {
		t.Errorf("no warning names kube.configmaps and its policy delete; warnings:\n%s", strings.Join(warnings, ""))
	}
	if !has("deletes by time", "topic=kube.secrets", "cleanupPolicy=compact,delete", "retentionMs=3600000") {
		t.Errorf("no warning names kube.secrets, compacted but deleted by time; warnings:\n%s", strings.Join(warnings, ""))
	}
	if has("kube.deployments.apps") {
		t.Errorf("a warning about the compacted kube.deployments.apps:\n%s", strings.Join(warnings, ""))
	}
	// Used as they are: nothing was changed.
	if got := c.TopicConfig("kube.configmaps", "cleanup.policy"); got != "delete" {
		t.Errorf("kube.configmaps: cleanup.policy changed to %q", got)
	}

	t.Run("history layout", func(t *testing.T) {
		var r compactionReports
		logs := &logtest.Buffer{}
		newLayoutSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_LAYOUT": "history"}), &r, logs, configmaps)
		if len(r.got) != 0 || strings.Contains(logs.String(), "not compacted") {
			t.Errorf("the history layout checked compaction: reports %v, logs:\n%s", r.got, logs)
		}
	})
}

func equalReports(got, want map[string]bool) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A topic compacted and deleted by size as well (compact,delete with a
// retention.bytes) drops the latest records of objects that do not
// change, as one deleted by time does: it gets the warning too.
func TestStateLayoutWarnsOfTopicDeletedBySize(t *testing.T) {
	c := kafkatest.Start(t)
	c.CreateTopic("kube.configmaps", 1, map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "1048576"})
	var r compactionReports
	logs := &logtest.Buffer{}
	newLayoutSink(t, clusterConfig(t, c, nil), &r, logs, configmaps)
	warned := false
	for line := range strings.Lines(logs.String()) {
		if containsAll(line, "level=WARN", "topic=kube.configmaps", "cleanupPolicy=compact,delete", "retentionBytes=1048576") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning names kube.configmaps, compacted but deleted by size; logs:\n%s", logs)
	}
}
