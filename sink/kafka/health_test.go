package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// skipAhead gives s's health a clock that runs with the real one, plus
// what the returned function adds to it.
func skipAhead(s *Sink) func(time.Duration) {
	var ahead atomic.Int64
	s.health.now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	return func(d time.Duration) { ahead.Add(int64(d)) }
}

// Health answers readiness probes and /metrics scrapes from the last
// write while the sink writes, so that many probes cost the brokers
// nothing; an idle sink asks a broker itself, once per healthFresh.
func TestHealthAnswersFromWrites(t *testing.T) {
	const probes = 100
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}), configmaps)
	skip := skipAhead(s)
	// Every ApiVersions request any broker gets: Health's own check is one.
	asked := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ApiVersions}, Observe: true, Count: -1})
	defer asked.Remove()

	probe := func(what string, n int) (calls int) {
		t.Helper()
		before := asked.Hits()
		for range n {
			if err := s.Health(); err != nil {
				t.Fatalf("%s: Health: %v", what, err)
			}
		}
		return asked.Hits() - before
	}

	calls := 0
	for rv := 1; rv <= 10; rv++ {
		if err := s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "a", "updated", rv)}); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		calls += probe("after a write", probes)
		skip(healthFresh / 2)
	}
	if calls != 0 {
		t.Errorf("%d probes while the sink wrote made %d ApiVersions requests, want 0", 10*probes, calls)
	}

	// The first probe of an idle sink asks a broker (on a connection it may
	// have to open, which asks too); the probes after it do not.
	for _, when := range []string{"idle", "idle, a while later"} {
		skip(healthFresh)
		if calls := probe(when, 1); calls == 0 {
			t.Errorf("%s: a probe made no ApiVersions request, want one", when)
		}
		if calls := probe(when, probes); calls != 0 {
			t.Errorf("%s: %d probes after the first made %d ApiVersions requests, want 0", when, probes, calls)
		}
	}
}

// A broker outage shows in Health: at once when a write fails to reach
// the brokers, and within healthFresh when the sink is idle.
func TestHealthShowsAnOutage(t *testing.T) {
	write := func(t *testing.T, s *Sink, rv int) error {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		err := s.Publish(ctx, []*wire.Message{message(configmaps, "ns", "a", "updated", rv)})
		if ctx.Err() != nil {
			t.Fatalf("Publish still running after 30s: %v", err)
		}
		return err
	}

	t.Run("a write that fails", func(t *testing.T) {
		c := kafkatest.Start(t)
		s := newSink(t, clusterConfig(t, c, nil), configmaps)
		skipAhead(s) // the clock stands still: only the write can tell
		if err := write(t, s, 1); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		if err := s.Health(); err != nil {
			t.Fatalf("Health after a write: %v", err)
		}
		c.Close()
		if err := write(t, s, 2); err == nil || sink.IsTerminal(err) {
			t.Fatalf("Publish to a stopped cluster: %v, want a retryable error", err)
		}
		err := s.Health()
		if err == nil || !strings.Contains(err.Error(), "kafka sink: brokers ") {
			t.Errorf("Health after a write to a stopped cluster: %v, want the brokers named in an error", err)
		}
	})

	t.Run("an idle sink", func(t *testing.T) {
		c := kafkatest.Start(t)
		s := newSink(t, clusterConfig(t, c, nil), configmaps)
		skip := skipAhead(s)
		if err := write(t, s, 1); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		c.Close()
		if err := s.Health(); err != nil {
			t.Fatalf("Health right after a write: %v, want the write's outcome", err)
		}
		skip(healthFresh)
		if err := s.Health(); err == nil {
			t.Errorf("Health of an idle sink %s after the cluster stopped: nil, want an error", healthFresh)
		}
	})
}

// A check's outcome does not overwrite a write's that came while the
// check ran: the write's is newer.
func TestHealthKeepsAWriteNewerThanTheCheck(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &health{now: func() time.Time { return now }}
	down := errors.New("no broker answers")
	for _, c := range []struct {
		name         string
		write, check error
		want         error
	}{
		{"a write succeeded while a check failed", nil, down, nil},
		{"a write failed while a check succeeded", down, nil, down},
	} {
		began := now
		now = now.Add(time.Second)
		h.record(c.write)
		now = now.Add(time.Second)
		if got := h.checked(began, c.check); got != c.want {
			t.Errorf("%s: checked returned %v, want %v", c.name, got, c.want)
		}
		if got, _ := h.recent(); got != c.want {
			t.Errorf("%s: health %v, want %v", c.name, got, c.want)
		}
	}
	// With no write since it began, the check's outcome is the last.
	began := now
	now = now.Add(time.Second)
	if got := h.checked(began, down); got != down {
		t.Errorf("a check alone: %v, want %v", got, down)
	}
}

// During a leader election the brokers' metadata names no leader for a
// partition: its records fail before any request is sent, and Health,
// which no broker answered, says so.
func TestHealthShowsNoLeader(t *testing.T) {
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": "1"}), configmaps)
	skipAhead(s) // the clock stands still: only the write can tell
	if err := s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "a", "updated", 1)}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health after a write: %v", err)
	}

	// From now on the brokers' metadata says the topic's partition has no
	// leader.
	real, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), c.Client())
	if err != nil {
		t.Fatal(err)
	}
	c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		res := req.ResponseKind().(*kmsg.MetadataResponse)
		res.Brokers, res.ClusterID, res.ControllerID = real.Brokers, real.ClusterID, real.ControllerID
		for _, topic := range real.Topics {
			topic.Partitions = slices.Clone(topic.Partitions)
			if topic.Topic != nil && *topic.Topic == "kube.configmaps" {
				for i := range topic.Partitions {
					topic.Partitions[i].Leader = -1
					topic.Partitions[i].ErrorCode = kerr.LeaderNotAvailable.Code
				}
			}
			res.Topics = append(res.Topics, topic)
		}
		return res, nil, true
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		leaders, err := s.p.leaders(t.Context(), "kube.configmaps")
		if err == nil && len(leaders) == 1 && leaders[0] < 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink's metadata still names a leader after a minute: %v %v", leaders, err)
		}
	}

	err = sink.PerMessage(s.Publish(t.Context(), []*wire.Message{message(configmaps, "ns", "a", "updated", 2)}), 1)[0]
	if err == nil || sink.IsTerminal(err) || !errors.Is(err, kafkago.LeaderNotAvailable) {
		t.Fatalf("Publish to a partition without a leader: %v, want a retryable LeaderNotAvailable", err)
	}
	if err := s.Health(); err == nil || !errors.Is(err, kafkago.LeaderNotAvailable) || !strings.Contains(err.Error(), "kafka sink: brokers ") {
		t.Errorf("Health after writes that found no leader: %v, want the missing leader, brokers named", err)
	}
}
