package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

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
