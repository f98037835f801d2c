package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubebus/bridge/source"
)

// resourceMetrics follow the set of resources watched (see source.Set).
type resourceMetrics struct {
	watched  *prometheus.GaugeVec
	added    prometheus.Counter
	removed  prometheus.Counter
	inFlight prometheus.Gauge
}

func newResourceMetrics() resourceMetrics {
	return resourceMetrics{
		watched: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bridge_resources_watched",
			Help: "Resources watched, by API group (\"core\" for the core group).",
		}, []string{"group"}),
		added: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bridge_resources_added_total",
			Help: "Resources a pattern of BRIDGE_RESOURCES selected while the bridge ran (a CRD or API service that appeared), and that it started watching.",
		}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bridge_resources_removed_total",
			Help: "Resources the bridge stopped watching while it ran because the cluster no longer serves them (a CRD or API service that went).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bridge_initial_lists_in_flight",
			Help: "Resources whose initial list is in flight; at most BRIDGE_LIST_CONCURRENCY.",
		}),
	}
}

func (r resourceMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.watched, r.added, r.removed, r.inFlight}
}

var _ source.SetObserver = (*Metrics)(nil)

// Watching counts a resource watched from now on.
func (m *Metrics) Watching(res source.Resource, added bool) {
	m.resources.watched.WithLabelValues(groupLabel(res)).Inc()
	if added {
		m.resources.added.Inc()
	}
}

// NotWatching counts a resource no longer watched, and forgets the
// series of its gauges.
func (m *Metrics) NotWatching(res source.Resource, removed bool) {
	m.resources.watched.WithLabelValues(groupLabel(res)).Dec()
	if removed {
		m.resources.removed.Inc()
	}
	m.synced.DeleteLabelValues(res.Name())
	m.served.DeleteLabelValues(res.Name(), res.Version)
}

// InitialList counts an initial list started, or ended.
func (m *Metrics) InitialList(started bool) {
	if started {
		m.resources.inFlight.Inc()
	} else {
		m.resources.inFlight.Dec()
	}
}

func groupLabel(res source.Resource) string {
	if res.Group == "" {
		return "core"
	}
	return res.Group
}
