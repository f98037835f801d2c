package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
)

// maxTopicName is Kafka's limit on a topic name's length.
const maxTopicName = 249

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

// CheckTopicName reports why name cannot be a Kafka topic name: names are
// 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', and not
// "." or "..".
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("empty topic name")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a topic name", name)
	case len(name) > maxTopicName:
		return fmt.Errorf("topic name %.20q... is %d characters, more than Kafka's %d", name, len(name), maxTopicName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q has %q; use letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
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

// EnsureTopics checks that each topic exists. When create is true it
// creates those that do not, as their TopicConfig says, and returns their
// names; a topic someone else created meanwhile counts as existing. When
// create is false a missing topic is an error that names it. client's
// transport must keep metadata for these topics.
func EnsureTopics(ctx context.Context, client *kafkago.Client, create bool, topics []kafkago.TopicConfig) ([]string, error) {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Topic
	}
	md, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: names})
	if err != nil {
		return nil, fmt.Errorf("read metadata of topics [%s]: %w", strings.Join(names, " "), err)
	}
	missing := map[string]bool{}
	var errs []error
	for _, t := range md.Topics {
		switch {
		case t.Error == nil:
		case errors.Is(t.Error, kafkago.UnknownTopicOrPartition):
			missing[t.Name] = true
		case errors.Is(t.Error, kafkago.LeaderNotAvailable):
			// The topic exists; its leaders are still being elected.
		default:
			errs = append(errs, fmt.Errorf("topic %s: %w", t.Name, t.Error))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var toCreate []kafkago.TopicConfig
	for _, t := range topics {
		if missing[t.Topic] {
			toCreate = append(toCreate, t)
		}
	}
	if len(toCreate) == 0 {
		return nil, nil
	}
	if !create {
		for _, t := range toCreate {
			errs = append(errs, fmt.Errorf("topic %s does not exist and BRIDGE_KAFKA_CREATE_TOPICS is false: create it, or let the bridge create it", t.Topic))
		}
		return nil, errors.Join(errs...)
	}
	res, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: toCreate})
	if err != nil {
		return nil, fmt.Errorf("create topics: %w", err)
	}
	var created []string
	for _, t := range toCreate {
		switch err := res.Errors[t.Topic]; {
		case err == nil:
			created = append(created, t.Topic)
		case errors.Is(err, kafkago.TopicAlreadyExists):
		default:
			errs = append(errs, fmt.Errorf("create topic %s: %w", t.Topic, err))
		}
	}
	return created, errors.Join(errs...)
}
