package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubebus/bridge/source"
)

// viewMetrics are the metrics of the view (BRIDGE_FILTER, BRIDGE_FIELDS,
// BRIDGE_DROP_FIELDS).
type viewMetrics struct {
	filterErrs *prometheus.CounterVec
	suppressed *prometheus.CounterVec
}

func newViewMetrics() viewMetrics {
	return viewMetrics{
		filterErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_filter_errors_total",
			Help: "Evaluations of BRIDGE_FILTER that failed at run time (a missing member, a value of another type, the cost limit exceeded), by resource. The object is taken as not matching; the errors are logged at a bounded rate.",
		}, []string{"resource"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_view_suppressed_total",
			Help: "Changes of objects that the view kept off the bus, by resource and reason: filtered (the object does not match BRIDGE_FILTER and was not published before) or unchanged (what BRIDGE_FIELDS and BRIDGE_DROP_FIELDS keep of it is what was published last).",
		}, []string{"resource", "reason"}),
	}
}

func (v viewMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.filterErrs, v.suppressed}
}

// ViewResource makes the view's series of resource, at 0, so that alerts
// and rates on them see a value from the start instead of nothing. Call it
// once per watched resource when the bridge runs with a view.
func (m *Metrics) ViewResource(resource string) {
	m.view.filterErrs.WithLabelValues(resource)
	m.view.suppressed.WithLabelValues(resource, string(source.NotInView))
	m.view.suppressed.WithLabelValues(resource, string(source.ProjectionUnchanged))
}

// FilterError counts an evaluation of the filter on an object of resource
// that failed at run time.
func (m *Metrics) FilterError(resource string) {
	m.view.filterErrs.WithLabelValues(resource).Inc()
}

// Suppressed counts a change of an object of res that the view did not
// publish, and why (source.Observer).
func (m *Metrics) Suppressed(res source.Resource, why source.Suppressed) {
	m.view.suppressed.WithLabelValues(res.Name(), string(why)).Inc()
}
