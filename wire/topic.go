package wire

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultTopicPrefix is the default of BRIDGE_KAFKA_TOPIC_PREFIX: topics
// such as kube.configmaps say where they come from.
const DefaultTopicPrefix = "kube"

// MaxTopicName is Kafka's limit on a topic name's length.
const MaxTopicName = 249

// TopicFor is the topic of a resource's changes when every resource has a
// topic of its own: "<prefix>.<resource>" for the core group
// ("kube.configmaps") and "<prefix>.<resource>.<group>" for others
// ("kube.deployments.apps"). The version is left out, so watching another
// version of a resource keeps its topic.
func TopicFor(prefix string, gr schema.GroupResource) string {
	if gr.Group == "" {
		return prefix + "." + gr.Resource
	}
	return prefix + "." + gr.Resource + "." + gr.Group
}

// KeyFor is the record key of m: the object's identity within its topic.
// With a topic per resource (shared false) that is m.Key(),
// "namespace/name" or "name"; on one topic for every resource
// (BRIDGE_KAFKA_TOPIC, shared true) it is prefixed with the resource,
// "deployments.apps/namespace/name", so that objects of different
// resources never share a key (nor, in a compacted topic, erase each
// other).
func KeyFor(m *Message, shared bool) string {
	if shared {
		return m.Resource.GroupResource().String() + "/" + m.Key()
	}
	return m.Key()
}

// CheckTopicName reports why name cannot be a Kafka topic name: names are
// 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', and not
// "." or "..".
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("empty topic name")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a topic name", name)
	case len(name) > MaxTopicName:
		return fmt.Errorf("topic name %.20q... is %d characters, more than Kafka's %d", name, len(name), MaxTopicName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q has %q; use letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
}
