package bridge

import (
	"context"
	"log/slog"
	"time"

	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/source"
)

// relistCheck is how often the reconciler looks for a relist.
const relistCheck = 5 * time.Second

// settleTimeout bounds the wait, in a pass, for what was handed on before
// it to be published: a bus that takes nothing for that long fails the
// pass, which the next one repeats.
const settleTimeout = 5 * time.Minute

// reconciler compares what the bus holds with the cluster (Set.Reconcile)
// every interval, and soon after a relist, once the bridge is ready.
type reconciler struct {
	set      *source.Set
	settle   func(context.Context) error
	interval time.Duration
	ready    <-chan struct{}
	metrics  *metrics.Metrics
	log      *slog.Logger
}

// Run runs passes until ctx ends.
func (r *reconciler) Run(ctx context.Context) error {
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil
	}
	var tick <-chan time.Time
	if r.interval > 0 {
		t := time.NewTicker(r.interval)
		defer t.Stop()
		tick = t.C
	}
	check := time.NewTicker(relistCheck)
	defer check.Stop()
	relists := r.set.Relists()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			r.pass(ctx, "scheduled")
		case <-check.C:
			if n := r.set.Relists(); n != relists {
				relists = n
				r.pass(ctx, "relist")
			}
		}
	}
}

// pass runs one comparison, and logs and counts it.
func (r *reconciler) pass(ctx context.Context, why string) {
	start := time.Now()
	repairs, err := r.set.Reconcile(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, settleTimeout)
		defer cancel()
		return r.settle(ctx)
	})
	if ctx.Err() != nil {
		return // stopping: not a failed pass
	}
	took := time.Since(start)
	r.metrics.ReconcileRun(took, err)
	var ghosts, missing, stale int
	var repaired []any
	for _, rp := range repairs {
		ghosts += rp.Ghosts
		missing += rp.Missing
		stale += rp.Stale
		if rp.Total() > 0 {
			repaired = append(repaired, slog.Group(rp.Resource.Name(), "ghosts", rp.Ghosts, "missing", rp.Missing, "stale", rp.Stale, "examples", rp.Examples))
		}
	}
	switch {
	case err != nil:
		r.log.Warn("reconcile: could not compare every resource with the bus; the next pass tries again",
			"trigger", why, "took", took.Round(time.Millisecond), "err", err)
	case ghosts+missing+stale > 0:
		r.log.Warn("reconcile: the bus differed from the cluster; repaired",
			append([]any{"trigger", why, "took", took.Round(time.Millisecond), "ghosts", ghosts, "missing", missing, "stale", stale}, repaired...)...)
	default:
		r.log.Info("reconcile: the bus agrees with the cluster", "trigger", why, "resources", len(repairs), "took", took.Round(time.Millisecond))
	}
}
