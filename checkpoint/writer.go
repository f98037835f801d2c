package checkpoint

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

const (
	// DefaultInterval is the flush interval NewWriter uses when given a
	// non-positive one.
	DefaultInterval = time.Second
)

// keepSpare is how many slots past four times its last batch the spare
// set of a Writer may have and be kept.
const keepSpare = 1024

var errNoStore = errors.New("checkpoint: writer has no store")

// Writer batches acknowledged records in memory and commits them to a
// Store. It keeps only the newest pending record per (Resource, Key), so its
// memory is bounded by the number of distinct objects, not by the rate of
// change. A Writer is safe for concurrent use.
type Writer struct {
	store    Store
	interval time.Duration
	logger   *slog.Logger

	// flushMu serialises flushes, so batches reach the store in the order
	// their records were taken: an older batch never lands after a newer one.
	flushMu sync.Mutex

	mu      sync.Mutex
	pending *pendingSet
	// spare is the emptied set of the last batch committed, which the next
	// flush takes as the pending set: its memory is reused instead of
	// grown again record by record.
	spare *pendingSet
	// seq numbers the records in order of arrival; durable is the number
	// of the newest record the last successful flush took. Every record
	// numbered up to durable is committed, or replaced by a newer one.
	seq, durable uint64
	inFlight     int // records taken by a flush that has not finished yet
	stats        WriterStats
	dropErr      error // why the last dropped record was invalid
	// lastFlush is when the last successful commit ended.
	lastFlush time.Time
}

// WriterStats are cumulative counters of a Writer.
type WriterStats struct {
	Flushes  uint64 // successful commits (flushes with nothing pending are not counted)
	Records  uint64 // records committed
	Failures uint64 // failed commits
	Dropped  uint64 // invalid records (empty Resource or Key) that Record discarded
	Pending  int    // records not committed yet, including those being committed
}

type pendingKey struct{ resource, key string }

// NewWriter returns a Writer that commits to store every interval once Run
// is called. A non-positive interval means DefaultInterval; a nil logger
// discards log output.
func NewWriter(store Store, interval time.Duration, logger *slog.Logger) *Writer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{
		store:    store,
		interval: interval,
		logger:   logger,
		pending:  newPendingSet(0),
	}
}

// Record queues acknowledged records for the next flush. A record replaces
// any pending one for the same (Resource, Key). Record never waits for I/O.
// Records with an empty Resource or Key are dropped, counted in
// WriterStats.Dropped and logged by Run, so that one bad record cannot make
// every flush fail.
func (w *Writer) Record(recs ...Record) {
	w.record(recs)
}

// record is Record; it returns the number of the last record it queued
// (or of the last queued before, when it queued none).
func (w *Writer) record(recs []Record) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		if r.Resource == "" || r.Key == "" {
			w.stats.Dropped++
			w.dropErr = r.validate(i)
			continue
		}
		w.seq++
		w.pending.add(r, w.seq)
	}
	return w.seq
}

// Flush commits everything pending, in the order it was recorded. If the
// commit fails, the records stay pending (a record made meanwhile for the
// same key replaces them) and the Store's error is returned unchanged.
// Concurrent calls are serialised.
func (w *Writer) Flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	return w.flush(ctx)
}

// flush is Flush; the caller holds flushMu.
func (w *Writer) flush(ctx context.Context) error {
	w.mu.Lock()
	batch := w.pending
	n := batch.len()
	if n == 0 {
		w.mu.Unlock()
		return nil
	}
	next := w.spare
	if next == nil {
		next = newPendingSet(n)
	}
	w.pending, w.spare = next, nil
	taken := w.seq
	w.inFlight = n
	w.mu.Unlock()

	// Only this flush holds batch now.
	recs := batch.take()
	err := w.commit(ctx, recs)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight = 0
	if err != nil {
		w.stats.Failures++
		// Put the batch back; anything recorded during the commit is newer.
		// Only the order of the numbers matters within a set, and there are
		// no more records than numbers given: renumbered from 1, the
		// records stay below the next number.
		newer := w.pending.take()
		back := newPendingSet(len(recs) + len(newer))
		seq := uint64(0)
		for _, rs := range [][]Record{recs, newer} {
			for i := range rs {
				seq++
				back.add(&rs[i], seq)
			}
		}
		w.pending = back
		return err
	}
	w.stats.Flushes++
	w.lastFlush = time.Now()
	w.stats.Records += uint64(n)
	w.durable = taken
	clear(recs)
	// The set of a burst (the first sync of a large cluster) is let go
	// rather than kept for the smaller batches that follow.
	if cap(batch.recs) <= 4*n+keepSpare {
		w.spare = batch
	}
	return nil
}

// RecordIntents records intents and flushes: it returns nil once they,
// and everything recorded before them, are committed. On an error it is
// as Flush: they stay pending, unless a newer record for the same object
// replaces them, and the Store's error is returned unchanged. Calling it
// again with the same intents after an error is harmless.
//
// Concurrent calls share commits: a call that waited for another's flush
// returns without one of its own when that flush committed its intents,
// and the first of those left waiting commits the intents of all of them.
func (w *Writer) RecordIntents(ctx context.Context, intents ...Intent) error {
	recs := make([]Record, len(intents))
	for i, in := range intents {
		recs[i] = in.Record()
	}
	mine := w.record(recs)
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	done := w.durable >= mine
	w.mu.Unlock()
	if done {
		return nil
	}
	return w.flush(ctx)
}

func (w *Writer) commit(ctx context.Context, recs []Record) error {
	if w.store == nil {
		return errNoStore
	}
	return w.store.Commit(ctx, recs)
}

// Run flushes every interval until ctx is done, then returns nil. It makes
// no final flush: the caller makes it with Flush once Run has returned,
// under the deadline its shutdown leaves for it (see the bridge's
// shutdown budget), since only the caller knows how long that is. Failed
// interval flushes are logged and retried on the next tick.
//
// A flush that fails with an error no retry can fix (IsTerminal: the store
// is damaged) ends Run at once with that error, before ctx is done: the
// caller must stop, since nothing it publishes from then on can be
// checkpointed, and must not try a final flush.
func (w *Writer) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	var dropped uint64
	for {
		select {
		case <-t.C:
			if ctx.Err() != nil {
				continue // both channels were ready; shut down instead
			}
			dropped = w.logDropped(dropped)
			err := w.Flush(ctx)
			if IsTerminal(err) {
				w.logger.Error("checkpoint: the store is damaged; no flush can succeed, stopping",
					"err", err, "pending", w.Stats().Pending)
				return err
			}
			if err != nil && ctx.Err() == nil {
				w.logger.Warn("checkpoint: flush failed, will retry",
					"err", err, "pending", w.Stats().Pending, "retryIn", w.interval)
			}
		case <-ctx.Done():
			w.logDropped(dropped)
			return nil
		}
	}
}

// logDropped logs records dropped since the count was seen, and returns the
// new count.
func (w *Writer) logDropped(seen uint64) uint64 {
	w.mu.Lock()
	n, err := w.stats.Dropped, w.dropErr
	w.mu.Unlock()
	if n > seen {
		w.logger.Warn("checkpoint: dropped invalid records", "count", n-seen, "lastErr", err)
	}
	return n
}

// LastFlush is when the last successful commit ended; zero before the
// first.
func (w *Writer) LastFlush() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastFlush
}

// Stats returns the Writer's counters. While a flush is in progress, a key
// recorded again since the flush began counts twice in Pending.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Pending = w.pending.len() + w.inFlight
	return s
}
