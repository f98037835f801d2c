package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

const (
	// DefaultInterval is the flush interval NewWriter uses when given a
	// non-positive one.
	DefaultInterval = time.Second
)

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

	mu       sync.Mutex
	pending  map[pendingKey]pendingRecord
	seq      uint64 // order of arrival, across keys
	inFlight int    // records taken by a flush that has not finished yet
	stats    WriterStats
	dropErr  error // why the last dropped record was invalid
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

type pendingRecord struct {
	Record
	seq uint64
}

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
		pending:  map[pendingKey]pendingRecord{},
	}
}

// Record queues acknowledged records for the next flush. A record replaces
// any pending one for the same (Resource, Key). Record never waits for I/O.
// Records with an empty Resource or Key are dropped, counted in
// WriterStats.Dropped and logged by Run, so that one bad record cannot make
// every flush fail.
func (w *Writer) Record(recs ...Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, r := range recs {
		if err := r.validate(i); err != nil {
			w.stats.Dropped++
			w.dropErr = err
			continue
		}
		w.seq++
		w.pending[pendingKey{r.Resource, r.Key}] = pendingRecord{Record: r, seq: w.seq}
	}
}

// Flush commits everything pending, in the order it was recorded. If the
// commit fails, the records stay pending (a record made meanwhile for the
// same key replaces them) and the Store's error is returned unchanged.
// Concurrent calls are serialised.
func (w *Writer) Flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()

	w.mu.Lock()
	batch := w.pending
	if len(batch) == 0 {
		w.mu.Unlock()
		return nil
	}
	w.pending = make(map[pendingKey]pendingRecord)
	w.inFlight = len(batch)
	w.mu.Unlock()

	err := w.commit(ctx, batch)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight = 0
	if err != nil {
		w.stats.Failures++
		// Put the batch back; anything recorded during the commit is newer.
		for k, p := range w.pending {
			batch[k] = p
		}
		w.pending = batch
		return err
	}
	w.stats.Flushes++
	w.lastFlush = time.Now()
	w.stats.Records += uint64(len(batch))
	return nil
}

// RecordIntents records intents and flushes: it returns nil once they,
// and everything recorded before them, are committed. On an error it is
// as Flush: they stay pending, unless a newer record for the same object
// replaces them, and the Store's error is returned unchanged. Calling it
// again with the same intents after an error is harmless.
func (w *Writer) RecordIntents(ctx context.Context, intents ...Intent) error {
	recs := make([]Record, len(intents))
	for i, in := range intents {
		recs[i] = in.Record()
	}
	w.Record(recs...)
	return w.Flush(ctx)
}

func (w *Writer) commit(ctx context.Context, batch map[pendingKey]pendingRecord) error {
	if w.store == nil {
		return errNoStore
	}
	ordered := make([]pendingRecord, 0, len(batch))
	for _, p := range batch {
		ordered = append(ordered, p)
	}
	slices.SortFunc(ordered, func(a, b pendingRecord) int { return cmp.Compare(a.seq, b.seq) })
	recs := make([]Record, len(ordered))
	for i, p := range ordered {
		recs[i] = p.Record
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
	s.Pending = len(w.pending) + w.inFlight
	return s
}
