package consumer

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Options narrow a ListerWatcher to one resource of one cluster.
type Options struct {
	// Cluster is the bridge's BRIDGE_CLUSTER_NAME. Required: records of
	// other clusters are skipped and counted as foreign, and so are Kafka
	// tombstones that name another cluster (see Record.Cluster).
	Cluster string
	// Resource is the resource to list and watch, e.g.
	// {Group: "", Resource: "configmaps"}. Required.
	Resource schema.GroupResource
	// Namespace narrows the ListerWatcher to one namespace; "" means all.
	Namespace string
	// LabelSelector narrows it to the objects whose labels match; nil
	// means every object. It is applied on the client side: an object
	// that stops matching is handed out as deleted, one that starts
	// matching as added, as an API server's watch does.
	LabelSelector labels.Selector
	// SnapshotFile is a bbolt file in which the ListerWatcher keeps the
	// objects the informer holds and their position, so that a new
	// ListerWatcher on the same file resumes without listing the bus.
	// "" keeps no snapshot. One ListerWatcher per file.
	SnapshotFile string
	// Name names this ListerWatcher in logs and in the "informer" label
	// of its metrics. Give each one of a process its own name.
	Name string
	// Logger receives what the ListerWatcher reports; nil discards it.
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers none. Many
	// ListerWatchers may share one Registerer: they share the metrics
	// and tell themselves apart by Name.
	Registerer prometheus.Registerer
}

// validate reports every problem of o at once, each naming its field.
func (o Options) validate() error {
	var errs []error
	if o.Cluster == "" {
		errs = append(errs, errors.New("consumer: Options.Cluster is empty: set it to the bridge's BRIDGE_CLUSTER_NAME"))
	}
	if o.Resource.Resource == "" {
		errs = append(errs, fmt.Errorf("consumer: Options.Resource %q names no resource", o.Resource.String()))
	}
	return errors.Join(errs...)
}

// selects reports whether an object with these labels is one the
// ListerWatcher hands out.
func (o Options) selects(l map[string]string) bool {
	return o.LabelSelector == nil || o.LabelSelector.Empty() || o.LabelSelector.Matches(labels.Set(l))
}
