package kafka

import (
	"fmt"
	"slices"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/wire"
)

// TopicOf is the topic the sink writes a resource's changes to:
// BRIDGE_KAFKA_TOPIC when it is set, wire.TopicFor(BRIDGE_KAFKA_TOPIC_PREFIX,
// the resource) otherwise.
func (c *Config) TopicOf(gvr schema.GroupVersionResource) string {
	if c.Topic != "" {
		return c.Topic
	}
	return wire.TopicFor(c.TopicPrefix, gvr.GroupResource())
}

// KeyOf is the record key of a message: wire.KeyFor, shared when every
// resource goes to one topic (BRIDGE_KAFKA_TOPIC).
func (c *Config) KeyOf(m *wire.Message) string { return wire.KeyFor(m, c.Topic != "") }

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
