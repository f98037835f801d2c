package kafkatest

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadAll returns every record of topic from each partition's log start
// to its current end, ordered by partition, then offset. It reads the
// partitions directly, outside any consumer group, with clients it closes
// before it returns, so that a test may poll it. A partition that
// retention or compaction emptied gives none.
func (c *Cluster) ReadAll(topic string) []*kgo.Record {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admc := c.newClient()
	defer admc.Close()
	adm := kadm.NewClient(admc)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		c.t.Fatalf("kafkatest: start offsets of %s: %v", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		c.t.Fatalf("kafkatest: end offsets of %s: %v", topic, err)
	}
	from := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	starts.Each(func(o kadm.ListedOffset) {
		if end, ok := ends.Lookup(topic, o.Partition); ok && end.Offset > o.Offset {
			from[o.Partition] = kgo.NewOffset().At(o.Offset)
			want[o.Partition] = end.Offset
		}
	})
	var out []*kgo.Record
	if len(want) == 0 {
		return out
	}
	cl := c.newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))
	defer cl.Close()
	next := map[int32]int64{}
	for !caughtUp(next, want) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			c.t.Fatalf("kafkatest: read %s: %v (read %d records)", topic, err, len(out))
		}
		fetches.EachError(func(t string, p int32, err error) {
			c.t.Fatalf("kafkatest: read %s partition %d: %v", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] {
				out = append(out, r)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

func caughtUp(next, want map[int32]int64) bool {
	for p, end := range want {
		if next[p] < end {
			return false
		}
	}
	return true
}

// EndOffsets returns the end offset of every partition of topic.
func (c *Cluster) EndOffsets(topic string) map[int32]int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := c.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		c.t.Fatalf("kafkatest: end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}
