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
		lists: counterVec("kubebus_consumer_lists_total",
			"Lists a bus informer served, from the bus's state or from its snapshot file.", "informer", "from"),
		expired: counterVec("kubebus_consumer_expired_total",
			"Watches answered with 410 Gone, after which the informer lists again.", "informer"),
		events: counterVec("kubebus_consumer_events_total",
			"Watch events handed to a bus informer, by type.", "informer", "type"),
		dropped: counterVec("kubebus_consumer_records_dropped_total",
			"Bus records a bus informer did not hand on, by reason.", "informer", "reason"),
	}
	for _, c := range []**prometheus.CounterVec{&m.lists, &m.expired, &m.events, &m.dropped} {
		var err error
		if *c, err = register(reg, *c); err != nil {
			return m, err
		}
	}
	return m, nil
}

// counterVec is a counter vector, not yet registered, with the given labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
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
