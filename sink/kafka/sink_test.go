package kafka

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// New creates missing topics as configured, or names the missing topic.
func TestNewTopics(t *testing.T) {
	t.Run("created with partitions and configs", func(t *testing.T) {
		c := kafkatest.Start(t)
		newSink(t, clusterConfig(t, c, map[string]string{
			"BRIDGE_KAFKA_TOPIC_PREFIX": "prod", "BRIDGE_KAFKA_PARTITIONS": "4", "BRIDGE_KAFKA_LAYOUT": "history",
			"BRIDGE_KAFKA_TOPIC_CONFIGS": "cleanup.policy=compact,delete,retention.ms=3600000",
		}), configmaps, deployments)
		for _, topic := range []string{"prod.configmaps", "prod.deployments.apps"} {
			if got := c.Partitions(topic); got != 4 {
				t.Errorf("%s: %d partitions, want 4", topic, got)
			}
			if got := c.TopicConfig(topic, "cleanup.policy"); got != "compact,delete" {
				t.Errorf("%s: cleanup.policy %q, want compact,delete", topic, got)
			}
			if got := c.TopicConfig(topic, "retention.ms"); got != "3600000" {
				t.Errorf("%s: retention.ms %q, want 3600000", topic, got)
			}
		}
	})
	t.Run("existing topics are used as they are", func(t *testing.T) {
		c := kafkatest.Start(t)
		c.CreateTopic("kube.configmaps", 2, nil)
		newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "8", "BRIDGE_KAFKA_CREATE_TOPICS": "false"}), configmaps)
		if got := c.Partitions("kube.configmaps"); got != 2 {
			t.Errorf("kube.configmaps: %d partitions, want the 2 it had", got)
		}
	})
	t.Run("missing topic without creation", func(t *testing.T) {
		c := kafkatest.Start(t)
		c.CreateTopic("kube.configmaps", 1, nil)
		_, err := New(t.Context(), clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_CREATE_TOPICS": "false"}),
			[]schema.GroupVersionResource{configmaps, deployments}, Options{}, testLogger(t))
		if err == nil || !strings.Contains(err.Error(), "topic kube.deployments.apps does not exist") || strings.Contains(err.Error(), "kube.configmaps does not") {
			t.Fatalf("New: %v; want an error naming kube.deployments.apps alone", err)
		}
		if c.Partitions("kube.deployments.apps") != 0 {
			t.Error("the topic was created anyway")
		}
	})
	t.Run("one topic for everything", func(t *testing.T) {
		c := kafkatest.Start(t)
		s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_TOPIC": "everything"}), configmaps, deployments)
		if err := s.Publish(t.Context(), []*wire.Message{
			message(configmaps, "ns", "a", "added", 1), message(deployments, "ns", "a", "added", 2),
		}); err != nil {
			t.Fatal(err)
		}
		recs := c.ReadAll("everything")
		keys := map[string]string{}
		for _, r := range recs {
			keys[string(r.Key)] = decode(t, r).ResourceVersion
		}
		if len(recs) != 2 || keys["configmaps/ns/a"] != "1" || keys["deployments.apps/ns/a"] != "2" {
			t.Errorf("topic everything holds %v, want both objects under keys of their own", keys)
		}
		if c.Partitions("kube.configmaps") != 0 {
			t.Error("a per-resource topic was created too")
		}
	})
}

// Each delete is followed by a tombstone with the same key, naming the
// delete's cluster, source and uid in headers, unless tombstones are off;
// binary mode carries the same events.
func TestTombstonesAndModes(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want []string // per record: "<rv>" for an event, "tombstone"
	}{
		{"structured with tombstones", nil, []string{"1", "2", "3", "tombstone", "4"}},
		{"binary with tombstones", map[string]string{"BRIDGE_KAFKA_CE_MODE": "binary"}, []string{"1", "2", "3", "tombstone", "4"}},
		{"no tombstones in the history layout", map[string]string{"BRIDGE_KAFKA_TOMBSTONES": "false", "BRIDGE_KAFKA_LAYOUT": "history"}, []string{"1", "2", "3", "4"}},
		{"compressed", map[string]string{"BRIDGE_KAFKA_COMPRESSION": "zstd"}, []string{"1", "2", "3", "tombstone", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t)
			s := newSink(t, clusterConfig(t, c, tt.vars), configmaps)
			in := []*wire.Message{
				message(configmaps, "ns", "a", "added", 1),
				message(configmaps, "ns", "a", "updated", 2),
				message(configmaps, "ns", "a", "deleted", 3),
				message(configmaps, "ns", "a", "added", 4), // created again under the same name
			}
			if err := s.Publish(t.Context(), in); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range c.ReadAll("kube.configmaps") {
				if string(r.Key) != "ns/a" {
					t.Errorf("key %q, want ns/a", r.Key)
				}
				m := decode(t, r)
				if m == nil {
					got = append(got, "tombstone")
					if h := headersOf(r); len(r.Headers) != 3 || h["ce_cluster"] != "test" || h["ce_source"] != in[2].Source || h["ce_uid"] != in[2].UID {
						t.Errorf("tombstone has headers %v, want the cluster, source and uid of its delete alone", h)
					}
					continue
				}
				got = append(got, m.ResourceVersion)
				h := headersOf(r)
				if h["ce_type"] != m.Type || h["ce_resourceversion"] != m.ResourceVersion || h["ce_id"] != m.ID {
					t.Errorf("headers %v do not carry type, resourceVersion and id of %s", h, m.ID)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("topic holds %v, want %v", got, tt.want)
			}
		})
	}
}

// A message too large for the producer limit or for the broker fails
// with sink.TooLarge, alone: the other objects of the batch are written.
// The bridge sends such a message again without the object's content, so
// until then the later changes of its object wait, and a delete's
// tombstone goes with the replacement. A replacement too large as well
// (marked ContentOmitted) is given up: its tombstone is still written, and
// the later changes of its object too.
func TestTooLarge(t *testing.T) {
	big := func(m *wire.Message, n int) *wire.Message {
		m.Data = []byte(`{"object":{"data":"` + strings.Repeat("x", n) + `"}}`)
		return m
	}
	tests := []struct {
		name    string
		cluster []kafkatest.Option
		vars    map[string]string
	}{
		{"over BRIDGE_KAFKA_MAX_MESSAGE_BYTES", nil, map[string]string{"BRIDGE_KAFKA_MAX_MESSAGE_BYTES": "20000"}},
		{"over the broker's message.max.bytes", []kafkatest.Option{kafkatest.WithBrokerConfigs(map[string]string{"message.max.bytes": "20000"})}, nil},
		{"over the topic's max.message.bytes", nil, map[string]string{"BRIDGE_KAFKA_TOPIC_CONFIGS": "max.message.bytes=20000"}},
	}
	for _, tt := range tests {
		for _, omitted := range []bool{false, true} {
			name := tt.name
			if omitted {
				name += ", replacement"
			}
			t.Run(name, func(t *testing.T) {
				c := kafkatest.Start(t, tt.cluster...)
				// One partition: the records share produce requests, which the
				// broker refuses whole.
				vars := map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}
				maps.Copy(vars, tt.vars)
				s := newSink(t, clusterConfig(t, c, vars), configmaps)
				msgs := []*wire.Message{
					message(configmaps, "ns", "small", "added", 1),
					big(message(configmaps, "ns", "big", "added", 2), 30000),
					message(configmaps, "ns", "big", "updated", 3),
					big(message(configmaps, "ns", "gone", "deleted", 4), 30000),
					message(configmaps, "ns", "small", "updated", 5),
					big(message(configmaps, "ns", "fits", "added", 6), 15000),
				}
				msgs[1].ContentOmitted, msgs[3].ContentOmitted = omitted, omitted
				errs := sink.PerMessage(s.Publish(t.Context(), msgs), len(msgs))
				for i, err := range errs {
					switch {
					case i == 1 || i == 3:
						if !sink.IsTooLarge(err) || !sink.IsTerminal(err) {
							t.Errorf("message %d (%s): %v, want it too large, terminally", i, msgs[i].Subject, err)
						}
					case i == 2 && !omitted:
						if err == nil || sink.IsTerminal(err) || !errors.Is(err, sink.ErrEarlierFailed) {
							t.Errorf("message %d (%s): %v, want it held back, to retry", i, msgs[i].Subject, err)
						}
					case err != nil:
						t.Errorf("message %d (%s): %v, want it written", i, msgs[i].Subject, err)
					}
				}
				var got []string
				for _, r := range c.ReadAll("kube.configmaps") {
					if m := decode(t, r); m != nil {
						got = append(got, string(r.Key)+"@"+m.ResourceVersion)
					} else {
						got = append(got, string(r.Key)+" tombstone")
					}
				}
				want := map[string]bool{"ns/small@1": true, "ns/small@5": true, "ns/fits@6": true}
				if omitted {
					want["ns/big@3"], want["ns/gone tombstone"] = true, true
				}
				if len(got) != len(want) {
					t.Errorf("topic holds %v, want %v", got, want)
				}
				for _, g := range got {
					if !want[g] {
						t.Errorf("topic holds %s, want %v", g, want)
					}
				}
			})
		}
	}
}

// A record exactly at BRIDGE_KAFKA_MAX_MESSAGE_BYTES is written; one byte
// more is refused before it is sent.
func TestMaxMessageBytesBoundary(t *testing.T) {
	c := kafkatest.Start(t)
	const limit = 4096
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_MAX_MESSAGE_BYTES": "4096"}), configmaps)
	sized := func(name string, rv, size int) *wire.Message {
		m := message(configmaps, "ns", name, "added", rv)
		m.Data = []byte(`{"object":{}}`)
		rec, err := s.encode(m, "kube.configmaps", []byte(m.Key()))
		if err != nil {
			t.Fatal(err)
		}
		pad := size - recordSize(&rec)
		m.Data = []byte(`{"object":{"p":"` + strings.Repeat("x", pad-len(`"p":""`)) + `"}}`)
		if rec, _ = s.encode(m, "kube.configmaps", []byte(m.Key())); recordSize(&rec) != size {
			t.Fatalf("made a record of %d bytes, want %d", recordSize(&rec), size)
		}
		return m
	}
	msgs := []*wire.Message{sized("at", 1, limit), sized("over", 2, limit+1)}
	errs := sink.PerMessage(s.Publish(t.Context(), msgs), 2)
	if errs[0] != nil || !sink.IsTerminal(errs[1]) {
		t.Errorf("errors %v; want the first written and the second terminal", errs)
	}
	if recs := c.ReadAll("kube.configmaps"); len(recs) != 1 || string(recs[0].Key) != "ns/at" {
		t.Errorf("topic holds %d records, want ns/at alone", len(recs))
	}
}

// Health reports a cluster that stopped answering; Close is idempotent.
func TestHealthAndClose(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, nil), configmaps)
	skip := skipAhead(s)
	if err := s.Health(); err != nil {
		t.Fatalf("Health of a running cluster: %v", err)
	}
	c.Close()
	skip(healthFresh)
	if s.Health() == nil {
		t.Fatalf("Health nil %s after the cluster stopped", healthFresh)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.Publish(ctx, []*wire.Message{message(configmaps, "ns", "a", "added", 1)}); err == nil || sink.IsTerminal(err) {
		t.Errorf("Publish to a stopped cluster: %v, want a retryable error", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A record over the producer's batch limit handed to write (the sink
// checks first, so only a record that slipped past that check could be)
// fails terminally without being sent, and the others are written.
func TestWriteRefusesRecordOverLimit(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_MAX_MESSAGE_BYTES": "2048"}), configmaps)
	recs := []kafkago.Message{
		{Topic: "kube.configmaps", Key: []byte("ns/a"), Value: []byte(`{}`)},
		{Topic: "kube.configmaps", Key: []byte("ns/b"), Value: make([]byte, 4096)},
		{Topic: "kube.configmaps", Key: []byte("ns/c"), Value: []byte(`{}`)},
	}
	errs := s.write(t.Context(), recs)
	if errs[0] != nil || !sink.IsTerminal(errs[1]) || errs[2] != nil {
		t.Errorf("errors %v; want ns/b terminal and the others written", errs)
	}
	if got := len(c.ReadAll("kube.configmaps")); got != 2 {
		t.Errorf("topic holds %d records, want 2", got)
	}
}
