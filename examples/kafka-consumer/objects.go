package main

import (
	"fmt"
	"maps"

	"github.com/kubebus/bridge/resourceversion"
	"github.com/kubebus/bridge/wire"
)

// object is what the consumer knows of one live object.
type object struct {
	UID             string
	ResourceVersion string
	Kind            string
}

// Objects is the live state of the objects the bridge's topics describe:
// every object added or updated and not deleted since. Records of one
// object arrive in order (they share a key, so a partition), which is all
// it relies on. A record repeated after a retry or a crash (same or older
// resourceVersion) changes nothing.
type Objects struct {
	byKey map[string]object // "<topic>/<record key>"
}

// NewObjects returns an empty state.
func NewObjects() *Objects { return &Objects{byKey: map[string]object{}} }

// Len is the number of live objects.
func (o *Objects) Len() int { return len(o.byKey) }

// Get returns what is known of the object with key in topic.
func (o *Objects) Get(topic, key string) (object, bool) {
	obj, ok := o.byKey[topic+"/"+key]
	return obj, ok
}

// Apply applies one record and describes what it changed, or returns ""
// when it changed nothing. A tombstone (nil value) forgets the key, as a
// deleted event does.
func (o *Objects) Apply(topic, key string, value []byte, headers map[string]string) (string, error) {
	id := topic + "/" + key
	m, err := wire.Kafka.Decode(value, maps.All(headers))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", topic, key, err)
	}
	cur, known := o.byKey[id]
	switch {
	case m == nil: // tombstone
		if !known {
			return "", nil
		}
		delete(o.byKey, id)
		return fmt.Sprintf("forgot   %s %s (tombstone)", topic, key), nil
	case m.Action == "deleted":
		if !known || cur.UID != m.UID {
			return "", nil
		}
		delete(o.byKey, id)
		return describe("deleted ", topic, key, m), nil
	case known && cur.UID == m.UID && !newer(m.ResourceVersion, cur.ResourceVersion):
		return "", nil // a repeat
	}
	o.byKey[id] = object{UID: m.UID, ResourceVersion: m.ResourceVersion, Kind: m.Kind}
	verb := "updated "
	if !known {
		verb = "added   "
	}
	return describe(verb, topic, key, m), nil
}

func describe(verb, topic, key string, m *wire.Message) string {
	snapshot := ""
	if m.Snapshot {
		snapshot = " (found on restart)"
	}
	return fmt.Sprintf("%s %s %s %s rv=%s%s", verb, topic, m.Kind, key, m.ResourceVersion, snapshot)
}

// newer reports whether resourceVersion a comes after b, by the rule the
// bridge dates messages by (package resourceversion). A resourceVersion it
// cannot compare counts as newer unless it is the same, so that it is
// applied.
func newer(a, b string) bool {
	c, err := resourceversion.Compare(a, b)
	if err != nil {
		return a != b
	}
	return c > 0
}
