package event

import (
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// ID is the id the encoder gives d's event: wire.ID of its message.
func ID(d *source.Delta) string {
	return wire.ID(&wire.Message{Resource: d.Resource.GroupVersionResource, Namespace: d.Namespace, Name: d.Name,
		UID: string(d.UID), ResourceVersion: d.ResourceVersion, Action: string(d.Type), Reason: string(d.Reason)})
}

// Source is the source of a resource's events (wire.Source).
func Source(cluster string, r source.Resource) string {
	return wire.Source(cluster, r.GroupVersionResource)
}
