package sink

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SpecVersion is the CloudEvents version of every message.
const SpecVersion = "1.0"

// ContentType is the media type of a message's data.
const ContentType = "application/json"

// Message is one change to one Kubernetes object, as a CloudEvents 1.0
// event. Its fields are the event's attributes; Data is its payload.
//
// The same change always produces the same ID, so consumers and buses can
// drop repeats of it.
type Message struct {
	// ID is derived from the object's uid, its resourceVersion and Action.
	ID string
	// Source names the cluster and the resource the object belongs to.
	Source string
	// Type is the event type; it ends in "." + Action.
	Type string
	// Subject is "namespace/name", or "name" for cluster-scoped objects.
	Subject string
	// Time is when the bridge observed the change.
	Time time.Time

	// Action is "added", "updated" or "deleted".
	Action string
	// Resource is the object's resource. Sinks use it to route messages
	// (subjects, topics); it is not an event attribute of its own.
	Resource schema.GroupVersionResource

	// Extension attributes.
	ResourceVersion string
	UID             string
	Kind            string
	APIVersion      string
	Namespace       string
	Name            string
	Cluster         string
	// Snapshot is true when the change was found by comparing a (re)list of
	// the resource with what the bridge published before, rather than seen
	// on a watch.
	Snapshot bool

	// Data is the JSON payload: {"object": ...}, plus "oldObject" on updates
	// when the bridge is configured to include it.
	Data json.RawMessage
}

// Key is the object's identity within its resource: "namespace/name", or
// "name" for cluster-scoped objects. All messages about one object share a
// key, and sinks that partition use it to keep them in order.
func (m *Message) Key() string { return m.Subject }

// structured is the JSON form of a Message in CloudEvents structured mode.
type structured struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	ResourceVersion string          `json:"resourceversion"`
	UID             string          `json:"uid"`
	Kind            string          `json:"kind"`
	APIVersion      string          `json:"apiversion"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name"`
	Cluster         string          `json:"cluster"`
	Snapshot        bool            `json:"snapshot"`
	Data            json.RawMessage `json:"data"`
}

// MarshalJSON encodes the message as a CloudEvents structured-mode event.
func (m *Message) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(structured{
		SpecVersion:     SpecVersion,
		ID:              m.ID,
		Source:          m.Source,
		Type:            m.Type,
		Subject:         m.Subject,
		Time:            m.Time.UTC().Format(time.RFC3339Nano),
		DataContentType: ContentType,
		ResourceVersion: m.ResourceVersion,
		UID:             m.UID,
		Kind:            m.Kind,
		APIVersion:      m.APIVersion,
		Namespace:       m.Namespace,
		Name:            m.Name,
		Cluster:         m.Cluster,
		Snapshot:        m.Snapshot,
		Data:            m.Data,
	})
	if err != nil {
		return nil, fmt.Errorf("sink: encode event %s: %w", m.ID, err)
	}
	return b, nil
}

// UnmarshalJSON decodes a CloudEvents structured-mode event written by
// MarshalJSON. Consumers and tests use it to read streams back.
func (m *Message) UnmarshalJSON(b []byte) error {
	var s structured
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("sink: decode event: %w", err)
	}
	if s.SpecVersion != SpecVersion {
		return fmt.Errorf("sink: decode event %q: specversion %q, want %q", s.ID, s.SpecVersion, SpecVersion)
	}
	t, err := time.Parse(time.RFC3339Nano, s.Time)
	if err != nil {
		return fmt.Errorf("sink: decode event %q: time: %w", s.ID, err)
	}
	gv, err := schema.ParseGroupVersion(s.APIVersion)
	if err != nil {
		return fmt.Errorf("sink: decode event %q: apiversion: %w", s.ID, err)
	}
	*m = Message{
		ID:              s.ID,
		Source:          s.Source,
		Type:            s.Type,
		Subject:         s.Subject,
		Time:            t,
		Action:          actionOf(s.Type),
		Resource:        gv.WithResource(resourceOf(s.Source)),
		ResourceVersion: s.ResourceVersion,
		UID:             s.UID,
		Kind:            s.Kind,
		APIVersion:      s.APIVersion,
		Namespace:       s.Namespace,
		Name:            s.Name,
		Cluster:         s.Cluster,
		Snapshot:        s.Snapshot,
		Data:            s.Data,
	}
	return nil
}

// actionOf returns what follows the last dot of an event type.
func actionOf(eventType string) string {
	for i := len(eventType) - 1; i >= 0; i-- {
		if eventType[i] == '.' {
			return eventType[i+1:]
		}
	}
	return eventType
}

// resourceOf returns the last path segment of an event source.
func resourceOf(source string) string {
	for i := len(source) - 1; i >= 0; i-- {
		if source[i] == '/' {
			return source[i+1:]
		}
	}
	return source
}
