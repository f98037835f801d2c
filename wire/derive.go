package wire

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TypePrefix starts every event type; the action follows it.
const TypePrefix = "io.kubebus.object."

// ReasonReconciled is the Reason of a change the bridge publishes to
// repair what the bus holds.
const ReasonReconciled = "reconciled"

// Derive fills the attributes that are derived from a message's identity
// (Cluster, Resource, Namespace, Name, UID, ResourceVersion, Action and
// Reason): ID, Source, Type and Subject, as ID, Source, Type and Subject
// say. It drops the message's encoding (Encoded), which no longer holds
// these attributes.
func (m *Message) Derive() {
	m.Encoded = nil
	m.ID = ID(m)
	m.Source = Source(m.Cluster, m.Resource)
	m.Type = Type(m.Action)
	m.Subject = Subject(m.Namespace, m.Name)
}

// ID is the event id of m's change: a hash of the resource, the object's
// identity (namespace, name, uid), its resourceVersion and the action,
// and, for a repair of the bus (ReasonReconciled), its reason. The same
// change always gets the same id; different changes get different ids. A
// repair is an event of its own: it publishes again a state whose first
// event the bus lost, which a bus that drops repeated ids (JetStream's
// duplicate window) would otherwise drop again.
func ID(m *Message) string {
	var scratch [256]byte
	b := scratch[:0]
	b = append(b, m.Resource.Resource...)
	if m.Resource.Group != "" {
		b = append(b, '.')
		b = append(b, m.Resource.Group...)
	}
	b = append(b, 0)
	for _, part := range [...]string{m.Namespace, m.Name, m.UID, m.ResourceVersion, m.Action} {
		b = append(b, part...)
		b = append(b, 0)
	}
	if m.Reason == ReasonReconciled {
		b = append(b, m.Reason...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Source is the event source of a resource's events:
// /clusters/<cluster>/api/v1/<resource> for the core group and
// /clusters/<cluster>/apis/<group>/<version>/<resource> for the others, the
// resource's path on the API server under the cluster's name. Decoding
// reads the resource back from its last segment.
func Source(cluster string, r schema.GroupVersionResource) string {
	if r.Group == "" {
		return "/clusters/" + cluster + "/api/" + r.Version + "/" + r.Resource
	}
	return "/clusters/" + cluster + "/apis/" + r.Group + "/" + r.Version + "/" + r.Resource
}

// Type is the event type of an action: TypePrefix and the action.
func Type(action string) string {
	// Constants, so that the common types cost no allocation.
	switch action {
	case ActionAdded:
		return TypePrefix + ActionAdded
	case ActionUpdated:
		return TypePrefix + ActionUpdated
	case ActionDeleted:
		return TypePrefix + ActionDeleted
	}
	return TypePrefix + action
}

// Subject is the subject of an object's events, its key:
// "namespace/name", or "name" for a cluster-scoped object.
func Subject(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
