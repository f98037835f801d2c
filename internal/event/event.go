// Package event turns deltas into CloudEvents messages.
//
// The mapping is documented in docs/message-format.md. It is deterministic:
// the same delta always yields the same event id, so a delta published
// twice (after a crash, or by a retry) can be recognised downstream.
package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
)

// TypePrefix starts every event type; the action follows it.
const TypePrefix = "io.kubebus.object."

// Encoder builds messages for one cluster.
type Encoder struct {
	// Cluster names the cluster in every message.
	Cluster string
}

// Encode turns d into a message. It fails only when the object cannot be
// encoded as JSON.
func (e Encoder) Encode(d *source.Delta) (*sink.Message, error) {
	var data bytes.Buffer
	data.WriteString(`{"object":`)
	if err := writeObject(&data, d.Object); err != nil {
		return nil, fmt.Errorf("event: encode %s %s: %w", d.Resource.Name(), d.Key(), err)
	}
	if d.OldObject != nil {
		data.WriteString(`,"oldObject":`)
		if err := writeObject(&data, d.OldObject); err != nil {
			return nil, fmt.Errorf("event: encode old %s %s: %w", d.Resource.Name(), d.Key(), err)
		}
	}
	data.WriteByte('}')

	action := string(d.Type)
	return &sink.Message{
		ID:              ID(d),
		Source:          Source(e.Cluster, d.Resource),
		Type:            TypePrefix + action,
		Subject:         d.Key(),
		Time:            d.Observed,
		Action:          action,
		Resource:        d.Resource.GroupVersionResource,
		ResourceVersion: d.ResourceVersion,
		UID:             string(d.UID),
		Kind:            d.Resource.Kind,
		APIVersion:      d.Resource.APIVersion(),
		Namespace:       d.Namespace,
		Name:            d.Name,
		Cluster:         e.Cluster,
		Snapshot:        d.Snapshot,
		Data:            data.Bytes(),
	}, nil
}

func writeObject(buf *bytes.Buffer, obj interface{ MarshalJSON() ([]byte, error) }) error {
	b, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	buf.Write(bytes.TrimRight(b, "\n"))
	return nil
}

// ID is the event id of d: a hash of the resource, the object's identity
// (namespace, name, uid), its resourceVersion and the delta type. The same
// change always gets the same id; different changes get different ids.
func ID(d *source.Delta) string {
	h := sha256.New()
	for _, part := range []string{d.Resource.Name(), d.Namespace, d.Name, string(d.UID), d.ResourceVersion, string(d.Type)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Source is the event source of a resource's events:
// /clusters/<cluster>/api/v1/<resource> for the core group and
// /clusters/<cluster>/apis/<group>/<version>/<resource> for the others, the
// resource's path on the API server under the cluster's name.
func Source(cluster string, r source.Resource) string {
	if r.Group == "" {
		return "/clusters/" + cluster + "/api/" + r.Version + "/" + r.Resource
	}
	return "/clusters/" + cluster + "/apis/" + r.Group + "/" + r.Version + "/" + r.Resource
}
