package kafkastore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/kafkaconn"
)

// topicPartitions is the partition count of a checkpoint topic the store
// creates. One partition keeps the whole checkpoint in one ordered log, so
// a flush is normally a single record batch, appended at once; the
// checkpoint is small (a record per object), so one partition is plenty.
const topicPartitions = 1

// ensureTopic makes sure topic exists and is compacted. A missing topic is
// created with cleanup.policy=compact when opts.CreateTopic allows it. An existing topic
// that is not compacted is an error: its records would expire, and a delete
// that happened while the bridge was down would go unnoticed.
func ensureTopic(ctx context.Context, client *kafkago.Client, opts Options, topic string, log *slog.Logger) error {
	created, err := kafkaconn.EnsureTopics(ctx, client, opts.CreateTopic, []kafkago.TopicConfig{{
		Topic:             topic,
		NumPartitions:     topicPartitions,
		ReplicationFactor: opts.ReplicationFactor,
		ConfigEntries:     []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}})
	if err != nil {
		return err
	}
	if len(created) > 0 {
		log.Info("created checkpoint topic", "topic", topic, "partitions", topicPartitions,
			"replicationFactor", opts.ReplicationFactor, "cleanupPolicy", "compact")
		return nil
	}
	res, err := client.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{
		Resources: []kafkago.DescribeConfigRequestResource{{
			ResourceType: kafkago.ResourceTypeTopic,
			ResourceName: topic,
			ConfigNames:  []string{"cleanup.policy"},
		}},
	})
	if err == nil && len(res.Resources) == 1 {
		err = res.Resources[0].Error
	}
	if err != nil {
		// Describing configs takes a permission that writing does not.
		log.Warn("cannot check that the checkpoint topic is compacted", "topic", topic, "err", err)
		return nil
	}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigName == "cleanup.policy" && !strings.Contains(e.ConfigValue, "compact") {
			return fmt.Errorf("topic %s has cleanup.policy=%s: a checkpoint topic must be compacted (cleanup.policy=compact), or its records expire and deletes made while the bridge is down are missed",
				topic, e.ConfigValue)
		}
	}
	return nil
}
