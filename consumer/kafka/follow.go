package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
)

// Follow passes to fn every record after the position from, partition by
// partition in offset order, until ctx ends or fn fails, with progress
// records as consumer.Log says: one as soon as it has read up to the end
// offsets listed when it started, then one at every check (every
// checkEvery) that finds it at the end of every partition.
//
// It returns an error wrapping consumer.ErrExpired at once when from is
// not a position of this topic (malformed, another topic ID: the topic was
// recreated, another partition count, an offset past a partition's end),
// when an offset is below its partition's log start, or, in a compacted
// topic, when the position is older than 90% of delete.retention.ms; and
// later when the topic is recreated or repartitioned, a partition's log
// start passes the read, or the read falls that far behind.
func (l *Log) Follow(ctx context.Context, from string, fn func(consumer.Record) error) error {
	err := l.follow(ctx, from, fn)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (l *Log) follow(ctx context.Context, from string, fn func(consumer.Record) error) error {
	pos, err := parsePosition(from)
	if err != nil {
		return expired("%v", err)
	}
	ts, err := l.describe(ctx)
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return expired("topic %s is gone: %v", l.topic, err)
		}
		return err
	}
	if id := ts.idPrefix(); id != pos.topicID {
		return expired("topic %s was recreated: its id starts %s, the position's %s", l.topic, id, pos.topicID)
	}
	n := len(ts.leaders)
	if len(pos.offsets) != n {
		return expired("topic %s has %d partitions, the position %d", l.topic, n, len(pos.offsets))
	}
	drm, err := l.deleteRetention(ctx)
	if err != nil {
		return err
	}
	if why := expiredAt(pos.time, drm, time.Now()); why != "" {
		return expired("topic %s: %s", l.topic, why)
	}
	starts, err := l.offsets(ctx, true, n)
	if err != nil {
		return err
	}
	for p, o := range pos.offsets {
		if o < starts[p] {
			return expired("topic %s partition %d starts at offset %d, after the position's %d", l.topic, p, starts[p], o)
		}
	}
	f := &follower{l: l, ts: ts, drm: drm, fn: fn, pos: pos,
		low: make([]time.Time, n), marks: make([]mark, n), got: make([]bool, n)}
	for p := range f.low {
		f.low[p] = pos.time
	}
	if err := f.check(ctx, true); err != nil {
		return err
	}
	if f.allRead() {
		if err := f.progress(); err != nil {
			return err
		}
	}
	offsets := make(map[int32]int64, n)
	for p, o := range pos.offsets {
		offsets[int32(p)] = o
	}
	cl, err := l.consumerClient(offsets, false)
	if err != nil {
		return err
	}
	defer cl.Close()
	return f.run(ctx, cl)
}

// mark says that the records of a partition from offset end on were
// appended after t.
type mark struct {
	t   time.Time
	end int64
	set bool
}

// follower is the state of one Follow.
type follower struct {
	l   *Log
	ts  topicState
	drm time.Duration
	fn  func(consumer.Record) error

	// pos.offsets are the offsets of the next records to pass on.
	pos position
	// low is, by partition, a time before which no record from its
	// offset in pos was appended; the position's time is the earliest.
	low []time.Time
	// marks are end offsets listed but not read up to yet.
	marks []mark
	// got is whether a partition had records since the last check.
	got []bool

	lastCheck time.Time
	caughtUp  bool // a progress record was passed on
	failed    int  // checks in a row that failed
}

// maxFailedChecks is how many checks in a row may fail (a leader moving,
// metadata out of date) before Follow returns the error.
const maxFailedChecks = 5

func (f *follower) run(ctx context.Context, cl *kgo.Client) error {
	for {
		wait := min(pollWait, time.Until(f.lastCheck.Add(checkEvery)))
		pctx, cancel := context.WithTimeout(ctx, max(wait, time.Millisecond))
		fetches := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f.fetchErrors(ctx, fetches); err != nil {
			return err
		}
		got := false
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			p := r.Partition
			if int(p) >= len(f.pos.offsets) || r.Offset < f.pos.offsets[p] {
				continue
			}
			got = true
			f.got[p] = true
			f.pos.offsets[p] = r.Offset + 1
			f.reached(int(p))
			if err := f.fn(decode(r, f.position().String())); err != nil {
				return err
			}
		}
		if !f.caughtUp && f.allRead() {
			if err := f.progress(); err != nil {
				return err
			}
		}
		since := time.Since(f.lastCheck)
		if since >= checkEvery || (!got && !f.allRead() && since >= pollWait) {
			if err := f.check(ctx, false); err != nil {
				if errors.Is(err, consumer.ErrExpired) || ctx.Err() != nil || f.failed >= maxFailedChecks {
					return err
				}
				// A broker moving leaders, or metadata not yet
				// up to date: the next check will tell.
				f.failed++
				f.l.log.Debug("consumer/kafka: check failed", "error", err, "failed", f.failed)
				continue
			}
			f.failed = 0
			// Outside check, so that fn's error is returned as it is,
			// never taken for a failed check.
			if f.allRead() {
				if err := f.progress(); err != nil {
					return err
				}
			}
		}
	}
}

// fetchErrors turns the errors of a poll into the error Follow returns.
func (f *follower) fetchErrors(ctx context.Context, fetches kgo.Fetches) error {
	var out error
	fetches.EachError(func(_ string, p int32, err error) {
		switch {
		case out != nil, isPollTimeout(ctx, err):
		case errors.Is(err, kerr.OffsetOutOfRange):
			out = expired("topic %s partition %d: records after offset %d are no longer in the log: %v", f.l.topic, p, f.pos.offsets[p], err)
		case errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.UnknownTopicOrPartition):
			out = expired("topic %s partition %d: the topic was deleted or recreated: %v", f.l.topic, p, err)
		default:
			out = fmt.Errorf("consumer/kafka: follow topic %s partition %d: %w", f.l.topic, p, err)
		}
	})
	return out
}

// reached notes that partition p was read up to its offset in pos.
func (f *follower) reached(p int) {
	if m := f.marks[p]; m.set && f.pos.offsets[p] >= m.end {
		if m.t.After(f.low[p]) {
			f.low[p] = m.t
		}
		f.marks[p] = mark{}
	}
}

// allRead reports whether every partition was read up to its mark.
func (f *follower) allRead() bool {
	for _, m := range f.marks {
		if m.set {
			return false
		}
	}
	return true
}

// position is where the Follow has read to.
func (f *follower) position() position {
	p := f.pos
	p.time = f.low[0]
	for _, t := range f.low[1:] {
		if t.Before(p.time) {
			p.time = t
		}
	}
	return p
}

func (f *follower) progress() error {
	f.caughtUp = true
	return f.fn(consumer.Record{Position: f.position().String()})
}

// check lists the end offsets and compares the topic with the one the
// Follow started on. Partitions read up to their end offset get its time;
// others get a mark, and those that had no records since the last check
// are probed for a tail with nothing to give. When every partition is then
// read up to its end, the caller passes on a progress record.
func (f *follower) check(ctx context.Context, first bool) error {
	l := f.l
	f.lastCheck = time.Now()
	if !first {
		ts, err := l.describe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return expired("topic %s is gone: %v", l.topic, err)
			}
			return err
		}
		if ts.id != f.ts.id {
			return expired("topic %s was recreated while it was followed", l.topic)
		}
		if len(ts.leaders) != len(f.ts.leaders) {
			return expired("topic %s went from %d to %d partitions while it was followed", l.topic, len(f.ts.leaders), len(ts.leaders))
		}
		f.ts = ts
	}
	t := time.Now() // before the end offsets: records after them come later
	ends, err := l.offsets(ctx, false, len(f.pos.offsets))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	for p, end := range ends {
		next := f.pos.offsets[p]
		switch {
		case next > end:
			return expired("topic %s partition %d ends at offset %d, before the position's %d: not a position of this topic", l.topic, p, end, next)
		case next == end:
			if t.After(f.low[p]) {
				f.low[p] = t
			}
			f.marks[p] = mark{}
		case !f.marks[p].set:
			f.marks[p] = mark{t: t, end: end, set: true}
		}
	}
	if !first {
		for p, m := range f.marks {
			if !m.set || f.got[p] {
				continue
			}
			done, err := l.probe(ctx, f.ts, p, f.pos.offsets[p], m.end)
			switch {
			case errors.Is(err, errProbeOutOfRange):
				return expired("topic %s: %v", l.topic, err)
			case err != nil:
				return err
			case done:
				f.pos.offsets[p] = m.end
				f.reached(p)
			}
		}
	}
	clear(f.got)
	if why := expiredAt(f.position().time, f.drm, time.Now()); why != "" {
		return expired("topic %s: the read fell behind: %s", l.topic, why)
	}
	return nil
}
