package kafka

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// defaultDeleteRetention is Kafka's delete.retention.ms when neither the
// topic nor the broker sets it: one day.
const defaultDeleteRetention = 24 * time.Hour

// topicState is what a Log needs to know of its topic at one time.
type topicState struct {
	id      kadm.TopicID
	leaders []int32 // by partition
}

func (t topicState) idPrefix() string { return topicIDPrefix(t.id) }

// describe reads the topic's ID and its partitions' leaders.
func (l *Log) describe(ctx context.Context) (topicState, error) {
	tds, err := l.admin.ListTopics(ctx, l.topic)
	if err != nil {
		return topicState{}, fmt.Errorf("consumer/kafka: metadata of topic %s: %w", l.topic, err)
	}
	td, ok := tds[l.topic]
	if !ok {
		return topicState{}, fmt.Errorf("consumer/kafka: metadata of topic %s: not in the answer", l.topic)
	}
	if td.Err != nil {
		return topicState{}, fmt.Errorf("consumer/kafka: topic %s: %w", l.topic, td.Err)
	}
	ts := topicState{id: td.ID, leaders: make([]int32, len(td.Partitions))}
	for p := range ts.leaders {
		pd, ok := td.Partitions[int32(p)]
		if !ok {
			return topicState{}, fmt.Errorf("consumer/kafka: topic %s: partitions are not numbered 0 to %d", l.topic, len(ts.leaders)-1)
		}
		ts.leaders[p] = pd.Leader
	}
	if len(ts.leaders) == 0 {
		return topicState{}, fmt.Errorf("consumer/kafka: topic %s has no partitions", l.topic)
	}
	return ts, nil
}

// offsets lists the start (start true) or end offset of every partition;
// there must be n of them.
func (l *Log) offsets(ctx context.Context, start bool, n int) ([]int64, error) {
	which, list := "end", l.admin.ListEndOffsets
	if start {
		which, list = "start", l.admin.ListStartOffsets
	}
	lo, err := list(ctx, l.topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("consumer/kafka: %s offsets of topic %s: %w", which, l.topic, err)
	}
	if got := len(lo[l.topic]); got != n {
		return nil, fmt.Errorf("consumer/kafka: %s offsets of topic %s: %d partitions, want %d", which, l.topic, got, n)
	}
	out := make([]int64, n)
	for p := range out {
		o, ok := lo.Lookup(l.topic, int32(p))
		if !ok || o.Offset < 0 {
			return nil, fmt.Errorf("consumer/kafka: %s offsets of topic %s: none for partition %d", which, l.topic, p)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// deleteRetention is how long the topic keeps a tombstone after it was
// written, when the topic is compacted; 0 when it is not (then records
// go only from the log start, which offsets show).
func (l *Log) deleteRetention(ctx context.Context) (time.Duration, error) {
	rcs, err := l.admin.DescribeTopicConfigs(ctx, l.topic)
	if err != nil {
		return 0, fmt.Errorf("consumer/kafka: configs of topic %s: %w", l.topic, err)
	}
	rc, err := rcs.On(l.topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, fmt.Errorf("consumer/kafka: configs of topic %s: %w", l.topic, err)
	}
	compacted, drm := false, defaultDeleteRetention
	for _, c := range rc.Configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "cleanup.policy":
			compacted = strings.Contains(*c.Value, "compact")
		case "delete.retention.ms":
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil || ms < 0 {
				return 0, fmt.Errorf("consumer/kafka: topic %s: delete.retention.ms %q is not milliseconds", l.topic, *c.Value)
			}
			drm = time.Duration(ms) * time.Millisecond
		}
	}
	if !compacted {
		return 0, nil
	}
	return drm, nil
}

// expiredAt reports why a position of time t can no longer be followed
// in a topic whose tombstones live drm (0: not compacted), or "".
func expiredAt(t time.Time, drm time.Duration, now time.Time) string {
	if drm == 0 {
		return ""
	}
	limit := time.Duration(float64(drm) * expiryMargin)
	if age := now.Sub(t); age >= limit {
		return fmt.Sprintf("position is %s old, and tombstones after it may be gone: the topic keeps them for delete.retention.ms %s (expired at %.0f%%)",
			age.Round(time.Millisecond), drm, expiryMargin*100)
	}
	return ""
}
