package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
)

// NewListerWatcher returns a ListerWatcher of opts.Resource of the
// cluster opts.Cluster, read from the topic cfg names with a Log of its
// own (see NewLog for what the Log does with client). Close it when done.
func NewListerWatcher(client *kgo.Client, cfg Config, opts consumer.Options) (*consumer.ListerWatcher, error) {
	log, err := NewLog(client, cfg, opts)
	if err != nil {
		return nil, err
	}
	return consumer.NewListerWatcher(log, opts)
}
