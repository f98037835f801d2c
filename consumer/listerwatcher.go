package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher is a cache.ListerWatcher backed by a Log: give it to
// cache.NewSharedIndexInformer with &unstructured.Unstructured{} as the
// example object. One ListerWatcher serves one informer.
//
// List and Watch may be called from any goroutine; a List or a Watch
// first stops the watch in progress, as the reflector does anyway.
type ListerWatcher struct {
	log    Log
	opts   Options
	logger *slog.Logger
	m      *metrics
	c      counters
	bad    badRecords

	// run is held by a List for its length, and by a watch's goroutine
	// for its life: they alone touch the fields below it.
	run  sync.Mutex
	t    *table    // nil before the first list
	snap *snapshot // nil without Options.SnapshotFile
	// listed is true once a list was served: a later list means the
	// informer's state is in doubt, and goes to the bus.
	listed bool
	// applied is the position the table is at; emitted, the position of
	// the last event handed out (the informer's resourceVersion). Records
	// between them made no event. dirty means an event was lost (its
	// watch stopped while handing it out): only a list can follow.
	applied, emitted string
	dirty            bool
	failures         int // follows that failed in a row, for the backoff

	mu     sync.Mutex
	active *watcher
	closed bool
}

var (
	_ cache.ListerWatcher            = (*ListerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*ListerWatcher)(nil)
)

// ErrClosed is returned by the methods of a closed ListerWatcher.
var ErrClosed = errors.New("consumer: ListerWatcher closed")

// NewListerWatcher makes a ListerWatcher of the resource opts names, read
// from log. With opts.SnapshotFile it opens (or creates) the file; a
// damaged one is set aside as SnapshotFile.damaged and logged.
func NewListerWatcher(log Log, opts Options) (*ListerWatcher, error) {
	if log == nil {
		return nil, errors.New("consumer: NewListerWatcher: nil Log")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	lw := &ListerWatcher{log: log, opts: opts, logger: opts.Logger}
	if lw.logger == nil {
		lw.logger = slog.New(slog.DiscardHandler)
	}
	lw.logger = lw.logger.With("informer", opts.Name, "resource", opts.Resource.String())
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	lw.m = m
	if opts.SnapshotFile != "" {
		snap, damaged, err := openSnapshot(opts.SnapshotFile, narrowing(&opts))
		if damaged != nil {
			lw.c.snapshotErrors.Add(1)
			lw.logger.Warn("consumer: snapshot file damaged; set aside, the first list reads the bus",
				"file", opts.SnapshotFile, "aside", opts.SnapshotFile+".damaged", "err", damaged)
		}
		if err != nil {
			return nil, err
		}
		lw.snap = snap
	}
	return lw, nil
}

// narrowing names the Options a snapshot holds objects for: a file
// written for others is not used.
func narrowing(o *Options) string {
	sel := ""
	if o.LabelSelector != nil {
		sel = o.LabelSelector.String()
	}
	return fmt.Sprintf("cluster=%q resource=%q namespace=%q selector=%q", o.Cluster, o.Resource.String(), o.Namespace, sel)
}

// List implements cache.Lister.
func (lw *ListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements cache.Watcher.
func (lw *ListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported tells the reflector to list, then
// watch: a ListerWatcher does not serve the initial events of a watch.
func (lw *ListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// Stats returns what the ListerWatcher counted so far.
func (lw *ListerWatcher) Stats() Stats { return lw.c.stats() }

// Close stops the watch in progress, writes the snapshot, and closes its
// file. Later calls of List and Watch return ErrClosed.
func (lw *ListerWatcher) Close() error {
	lw.mu.Lock()
	if lw.closed {
		lw.mu.Unlock()
		return nil
	}
	lw.closed = true
	if lw.active != nil {
		lw.active.Stop()
	}
	lw.mu.Unlock()
	lw.run.Lock()
	defer lw.run.Unlock()
	if lw.snap == nil {
		return nil
	}
	var err error
	if lw.applied != "" {
		err = lw.snap.flush(lw.applied, now())
	}
	return errors.Join(err, lw.snap.close())
}

// begin stops the watch in progress and takes run; false when closed.
func (lw *ListerWatcher) begin() bool {
	lw.mu.Lock()
	if lw.active != nil {
		lw.active.Stop()
		lw.active = nil
	}
	closed := lw.closed
	lw.mu.Unlock()
	if closed {
		return false
	}
	lw.run.Lock()
	lw.mu.Lock()
	closed = lw.closed
	lw.mu.Unlock()
	if closed {
		lw.run.Unlock()
	}
	return !closed
}
