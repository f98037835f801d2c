
package nats

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
)

// NewListerWatcher returns a cache.ListerWatcher of opts.Resource in
// opts.Cluster (and opts.Namespace when set), read from the bridge's
// JetStream stream: the ListerWatcher of the package consumer on NewLog.
func NewListerWatcher(js jetstream.JetStream, cfg Config, opts consumer.Options) (*consumer.ListerWatcher, error) {
	l, err := NewLog(js, cfg, opts)
	if err != nil {
		return nil, err
	}
	return consumer.NewListerWatcher(l, opts)
}
