package consumer

// This file is a stand-in for the core package's Options, so that
// consumer/kafka compiles before the core exists. Delete it on merge.

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Options narrow a ListerWatcher to one resource of one cluster.
type Options struct {
	Cluster       string                // required: the bridge's BRIDGE_CLUSTER_NAME
	Resource      schema.GroupResource  // required, e.g. {Group:"", Resource:"configmaps"}
	Namespace     string                // "" = all namespaces
	LabelSelector labels.Selector       // nil = everything (applied on the client side)
	SnapshotFile  string                // "" = none
	Name          string                // names this informer in logs and metrics
	Logger        *slog.Logger          // nil = discard
	Registerer    prometheus.Registerer // nil = no metrics registered
}
