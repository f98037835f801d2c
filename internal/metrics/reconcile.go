package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubebus/bridge/source"
)

// The kinds of drift a reconcile pass repairs (the kind label of
// bridge_reconcile_repaired_total).
const (
	// DriftGhost: the bus holds a live object the cluster lacks; its delete
	// is published.
	DriftGhost = "ghost"
	// DriftMissing: the cluster holds an object the bus lacks; its state is
	// published.
	DriftMissing = "missing"
	// DriftStale: the bus holds an older state of an object than the
	// cluster; its current state is published.
	DriftStale = "stale"
)

// reconcileMetrics describe the passes that compare what the bus holds
// with the cluster.
type reconcileMetrics struct {
	runs     *prometheus.CounterVec
	repaired *prometheus.CounterVec
	duration prometheus.Histogram
	last     prometheus.Gauge
}

func newReconcileMetrics() reconcileMetrics {
	return reconcileMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_reconcile_runs_total",
			Help: "Passes that compared what the bus holds with the cluster, by result: ok (compared, repaired or not) or error (the bus or the API server could not be read; retried at the next pass).",
		}, []string{"result"}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_reconcile_repaired_total",
			Help: "Objects a reconcile pass found wrong on the bus and published again, by resource and kind: ghost (on the bus, not in the cluster: deleted), missing (in the cluster, not on the bus) or stale (on the bus at an older state).",
		}, []string{"resource", "kind"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bridge_reconcile_duration_seconds",
			Help: "How long one reconcile pass took, reading the bus included.",
			// 10 ms to about 20 min.
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18),
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bridge_reconcile_last_success_timestamp_seconds",
			Help: "When the last reconcile pass that compared every resource ended, in seconds since the epoch; 0 before the first.",
		}),
	}
}

func (r reconcileMetrics) collectors() []prometheus.Collector {
	// Both results are there from the start, at 0, so that an alert on
	// them sees a value instead of nothing.
	r.runs.WithLabelValues("ok")
	r.runs.WithLabelValues("error")
	return []prometheus.Collector{r.runs, r.repaired, r.duration, r.last}
}

// ReconcileRun records one reconcile pass that took took; err is nil when
// it compared every resource.
func (m *Metrics) ReconcileRun(took time.Duration, err error) {
	m.reconcile.duration.Observe(took.Seconds())
	if err != nil {
		m.reconcile.runs.WithLabelValues("error").Inc()
		return
	}
	m.reconcile.runs.WithLabelValues("ok").Inc()
	m.reconcile.last.SetToCurrentTime()
}

// ReconcileRepaired counts n objects of resource that a reconcile pass
// repaired, of kind DriftGhost, DriftMissing or DriftStale.
func (m *Metrics) ReconcileRepaired(resource, kind string, n int) {
	if n > 0 {
		m.reconcile.repaired.WithLabelValues(resource, kind).Add(float64(n))
	}
}

var _ source.RepairObserver = (*Metrics)(nil)

// Repaired counts the objects of a repair of the bus, by kind.
func (m *Metrics) Repaired(r source.Repair) {
	m.ReconcileRepaired(r.Resource.Name(), DriftGhost, r.Ghosts)
	m.ReconcileRepaired(r.Resource.Name(), DriftMissing, r.Missing)
	m.ReconcileRepaired(r.Resource.Name(), DriftStale, r.Stale)
}
