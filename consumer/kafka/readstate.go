package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubebus/bridge/consumer"
)

// refreshEvery is how many fruitless rounds of a ReadState go by before
// it reads the topic's metadata again (the leaders its probes ask).
const refreshEvery = 5

// ReadState passes to fn every record of every partition, from the log
// start up to the end offsets listed when it starts, partition by
// partition in offset order (so one key's records in their order; records
// of different partitions interleave), and returns the position of those
// end offsets, timed just before they were listed.
//
// In a compacted topic that is each key's latest record, and the
// tombstones of keys deleted less than delete.retention.ms ago. Kafka
// keeps a tombstone for delete.retention.ms after it cleans the record it
// deletes, so a read that ends within delete.retention.ms of its start
// sees the tombstone of every live record it read; one that takes longer
// returns an error wrapping consumer.ErrExpired.
func (l *Log) ReadState(ctx context.Context, fn func(consumer.Record) error) (string, error) {
	ts, err := l.describe(ctx)
	if err != nil {
		return "", err
	}
	drm, err := l.deleteRetention(ctx)
	if err != nil {
		return "", err
	}
	n := len(ts.leaders)
	start := time.Now() // before the end offsets: records after them come later
	ends, err := l.offsets(ctx, false, n)
	if err != nil {
		return "", err
	}
	starts, err := l.offsets(ctx, true, n)
	if err != nil {
		return "", err
	}
	pos := position{topicID: ts.idPrefix(), time: start, offsets: starts}
	todo := map[int32]int64{} // partitions not read up to their end offset
	for p := range n {
		if starts[p] < ends[p] {
			todo[int32(p)] = starts[p]
		}
	}
	if len(todo) > 0 {
		if err := l.readUpTo(ctx, ts, ends, &pos, todo, fn); err != nil {
			return "", err
		}
	}
	for p := range n {
		pos.offsets[p] = max(pos.offsets[p], ends[p])
	}
	if why := expiredAt(start, drm, time.Now()); why != "" {
		return "", expired("reading the state of topic %s took too long: %s", l.topic, why)
	}
	return pos.String(), nil
}

// readUpTo reads the partitions of todo from their offsets in it up to
// ends, passing records to fn with positions made of pos, whose offsets
// it moves on.
func (l *Log) readUpTo(ctx context.Context, ts topicState, ends []int64, pos *position, todo map[int32]int64, fn func(consumer.Record) error) error {
	cl, err := l.consumerClient(todo, true)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := pos.offsets
	finish := func(p int32) {
		next[p] = max(next[p], ends[p])
		delete(todo, p)
	}
	idle := 0
	for len(todo) > 0 {
		pctx, cancel := context.WithTimeout(ctx, pollWait)
		fetches := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(_ string, p int32, err error) {
			if ferr == nil && !isPollTimeout(ctx, err) {
				ferr = fmt.Errorf("consumer/kafka: read topic %s partition %d: %w", l.topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		got := false
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			p := r.Partition
			if _, ok := todo[p]; !ok || r.Offset < next[p] {
				continue
			}
			got = true
			if r.Offset >= ends[p] {
				finish(p)
				continue
			}
			next[p] = r.Offset + 1
			if next[p] >= ends[p] {
				finish(p)
			}
			if err := fn(decode(r, pos.String())); err != nil {
				return err
			}
		}
		if got {
			idle = 0
			continue
		}
		// Nothing came: the partitions left may end in offsets that hold
		// no record a consumer is given.
		if idle++; idle%refreshEvery == 0 {
			fresh, err := l.describe(ctx)
			if err != nil {
				return err
			}
			if fresh.id != ts.id || len(fresh.leaders) != len(ts.leaders) {
				return fmt.Errorf("consumer/kafka: topic %s was recreated or repartitioned while its state was read", l.topic)
			}
			ts = fresh
		}
		for p := range todo {
			done, err := l.probe(ctx, ts, int(p), next[p], ends[p])
			if errors.Is(err, errProbeOutOfRange) {
				// The log start passed the read: what went is gone, and
				// the client starts again from the new log start.
				starts, err := l.offsets(ctx, true, len(ends))
				if err != nil {
					return err
				}
				done = starts[p] >= ends[p]
				next[p] = max(next[p], starts[p])
			} else if err != nil {
				return err
			}
			if done {
				finish(p)
			}
		}
	}
	return nil
}
