package kafka

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

// Options are the knobs of New beyond the configuration. The zero value
// makes a sink for the resources New is given, which reports nothing.
type Options struct {
	// ResourcesAdded lets Prepare take resources that New was not given,
	// making their topics as New does: for a bridge whose resources
	// follow the cluster. The sink's cached metadata then covers every
	// topic of the cluster rather than its own only, since kafka-go
	// cannot widen it later.
	ResourcesAdded bool
	// TopicCompaction, when set, is told by New, in the state layout,
	// whether each topic is compacted: true for a topic it created, what
	// the broker says for one that existed. A topic whose configs cannot
	// be read is not reported. The bridge turns the reports into the
	// gauge bridge_kafka_topic_not_compacted.
	TopicCompaction func(topic string, compacted bool)
}

// options are Options as the sink keeps them.
type options struct {
	compaction func(topic string, compacted bool)
	// added: Prepare may be asked for topics New was not given.
	added bool
}

// checkCompaction reads the cleanup policy and retention of topics that
// the state layout found existing, and warns of each that cannot keep the
// state: one not compacted, or compacted and deleted by time or size as
// well. It
// never fails: the topic works, and what it holds is the operator's call.
func checkCompaction(ctx context.Context, client *kafkago.Client, topics []string, log *slog.Logger, report func(topic string, compacted bool)) {
	if len(topics) == 0 {
		return
	}
	req := &kafkago.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafkago.DescribeConfigRequestResource{
			ResourceType: kafkago.ResourceTypeTopic,
			ResourceName: t,
			ConfigNames:  []string{configCleanupPolicy, configRetentionMs, configRetentionBytes},
		})
	}
	res, err := client.DescribeConfigs(ctx, req)
	if err == nil && len(res.Resources) != len(topics) {
		err = errors.New("the broker described another number of topics than asked")
	}
	if err != nil {
		// Describing configs takes a permission that writing does not.
		log.Warn("cannot check that the topics are compacted, as BRIDGE_KAFKA_LAYOUT=state wants", "topics", topics, "err", err)
		return
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			log.Warn("cannot check that the topic is compacted, as BRIDGE_KAFKA_LAYOUT=state wants", "topic", r.ResourceName, "err", r.Error)
			continue
		}
		var policy, retention, retentionBytes string
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case configCleanupPolicy:
				policy = e.ConfigValue
			case configRetentionMs:
				retention = e.ConfigValue
			case configRetentionBytes:
				retentionBytes = e.ConfigValue
			}
		}
		limited := func(v string) bool {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return err == nil && n >= 0
		}
		compacted := hasPolicy(policy, "compact")
		report(r.ResourceName, compacted)
		switch {
		case !compacted:
			log.Warn("topic is not compacted although BRIDGE_KAFKA_LAYOUT=state: records of objects that do not change expire with the topic's retention, and a consumer that starts later misses those objects; set cleanup.policy=compact and retention.ms=-1 on the topic",
				"topic", r.ResourceName, "cleanupPolicy", policy, "retentionMs", retention)
		case hasPolicy(policy, "delete") && (limited(retention) || limited(retentionBytes)):
			log.Warn("topic is compacted but deletes by time or size too although BRIDGE_KAFKA_LAYOUT=state: records of objects that do not change expire with the topic's retention; set cleanup.policy=compact, or retention.ms=-1 and retention.bytes=-1, on the topic",
				"topic", r.ResourceName, "cleanupPolicy", policy, "retentionMs", retention, "retentionBytes", retentionBytes)
		}
	}
}
