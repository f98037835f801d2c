package consumer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a ListerWatcher's Prometheus series: the vectors are shared
// by every ListerWatcher of one Registerer, each with its own "informer"
// label.
type metrics struct {
	lists   *prometheus.CounterVec // informer, from
	expired *prometheus.CounterVec // informer
	events  *prometheus.CounterVec // informer, type
	dropped *prometheus.CounterVec // informer, reason
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		lists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_consumer_lists_total",
			Help: "Lists a bus informer served, from the bus's state or from its snapshot file.",
		}, []string{"informer", "from"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_consumer_expired_total",
			Help: "Watches answered with 410 Gone, after which the informer lists again.",
		}, []string{"informer"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_consumer_events_total",
			Help: "Watch events handed to a bus informer, by type.",
		}, []string{"informer", "type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_consumer_records_dropped_total",
			Help: "Bus records a bus informer did not hand on, by reason.",
		}, []string{"informer", "reason"}),
	}
	var err error
	m.lists, err = register(reg, m.lists)
	if err == nil {
		m.expired, err = register(reg, m.expired)
	}
	if err == nil {
		m.events, err = register(reg, m.events)
	}
	if err == nil {
		m.dropped, err = register(reg, m.dropped)
	}
	return m, err
}

// register registers c, or returns the vector another ListerWatcher
// registered under the same name.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	if err != nil {
		return nil, errors.Join(errors.New("consumer: register metrics"), err)
	}
	return c, nil
}
