package kafka

import (
	"fmt"
	"slices"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
)

// TopicFor is the topic of a resource's changes when every resource has a
// topic of its own: "<prefix>.<resource>" for the core group
// ("kube.configmaps") and "<prefix>.<resource>.<group>" for others
// ("kube.deployments.apps"). The version is left out, so watching another
// version of a resource keeps its topic.
func TopicFor(prefix string, gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return prefix + "." + gvr.Resource
	}
	return prefix + "." + gvr.Resource + "." + gvr.Group
}

// TopicOf is the topic the sink writes a resource's changes to:
// BRIDGE_KAFKA_TOPIC when it is set, TopicFor(BRIDGE_KAFKA_TOPIC_PREFIX,
// gvr) otherwise.
func (c *Config) TopicOf(gvr schema.GroupVersionResource) string {
	if c.Topic != "" {
		return c.Topic
	}
	return TopicFor(c.TopicPrefix, gvr)
}

// KeyOf is the record key of a message: the object's identity within its
// topic. With a topic per resource that is m.Key(), "namespace/name" or
// "name"; with one topic for every resource it is prefixed with the
// resource, "deployments.apps/namespace/name", so that objects of
// different resources never share a key (nor, in a compacted topic, erase
// each other).
func (c *Config) KeyOf(m *sink.Message) string {
	if c.Topic != "" {
		return m.Resource.GroupResource().String() + "/" + m.Key()
	}
	return m.Key()
}

// ParseTopicConfigs reads "name=value,name=value". A part without '=' goes
// on with the value before it, so list values keep their commas:
// "cleanup.policy=compact,delete,retention.ms=60000" is cleanup.policy
// "compact,delete" and retention.ms "60000".
func ParseTopicConfigs(s string) ([]kafkago.ConfigEntry, error) {
	var out []kafkago.ConfigEntry
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			if len(out) == 0 {
				return nil, fmt.Errorf("%q is not name=value", part)
			}
			out[len(out)-1].ConfigValue += "," + part
			continue
		}
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%q has no config name", part)
		}
		if slices.ContainsFunc(out, func(e kafkago.ConfigEntry) bool { return e.ConfigName == name }) {
			return nil, fmt.Errorf("%s is set twice", name)
		}
		out = append(out, kafkago.ConfigEntry{ConfigName: name, ConfigValue: value})
	}
	return out, nil
}
