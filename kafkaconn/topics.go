package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

// MaxTopicName is Kafka's limit on a topic name's length.
const MaxTopicName = 249

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
