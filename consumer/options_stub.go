package consumer

import (
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Options is a TEMPORARY stub holding only the fields consumer/nats reads,
// so that it compiles before the core's Options exists. Delete this file
// when merging the core (consumer/options.go defines Options in full).
type Options struct {
	Cluster   string               // required: the bridge's BRIDGE_CLUSTER_NAME
	Resource  schema.GroupResource // required, e.g. {Group:"", Resource:"configmaps"}
	Namespace string               // "" = all namespaces
	Logger    *slog.Logger         // nil = discard
}
