package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubebus/bridge/source"
)

var (
	watchHealthyDesc = prometheus.NewDesc("bridge_watch_healthy",
		"1 while every watch of the resource hears from the API server and works, else 0: nothing heard (no event, bookmark, list answer or watch ended at its timeout; an opened watch is not enough) or calls failing, or cut for silence, for longer than BRIDGE_WATCH_STALL_TIMEOUT.",
		[]string{"resource"}, nil)
	watchContactDesc = prometheus.NewDesc("bridge_watch_last_contact_timestamp_seconds",
		"When the API server last answered a watch of the resource (an event, a bookmark, a list answer, a watch ended at its timeout, or a refusal), in seconds since the epoch; the oldest of its namespaces. Alert on time() minus this.",
		[]string{"resource"}, nil)
)

// watchCollector reads the source's watch health at scrape time.
type watchCollector struct{ watches func() []source.WatchStatus }

func (c watchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- watchHealthyDesc
	ch <- watchContactDesc
}

func (c watchCollector) Collect(ch chan<- prometheus.Metric) {
	type agg struct {
		healthy bool
		contact float64
	}
	var order []string
	byRes := map[string]*agg{}
	for _, st := range c.watches() {
		name := st.Resource.Name()
		contact := float64(st.LastContact.UnixNano()) / 1e9
		a, ok := byRes[name]
		if !ok {
			a = &agg{healthy: true, contact: contact}
			byRes[name] = a
			order = append(order, name)
		}
		a.healthy = a.healthy && st.Err == nil
		a.contact = min(a.contact, contact)
	}
	for _, name := range order {
		a := byRes[name]
		healthy := 0.0
		if a.healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(watchHealthyDesc, prometheus.GaugeValue, healthy, name)
		ch <- prometheus.MustNewConstMetric(watchContactDesc, prometheus.GaugeValue, a.contact, name)
	}
}

// Watches registers the gauges of watch health, read from watches at
// scrape time: bridge_watch_healthy and
// bridge_watch_last_contact_timestamp_seconds, per resource. Call it once.
func (m *Metrics) Watches(watches func() []source.WatchStatus) {
	m.Registry.MustRegister(watchCollector{watches})
}
