package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

var (
	_ sink.DiscoveryWriter    = (*Sink)(nil)
	_ sink.DiscoveryRefresher = (*Sink)(nil)
)

// DiscoveryRefresh is half the retention.ms of a discovery topic that
// deletes by time (one made by hand, or auto-created by the broker, with
// cleanup.policy=delete), so that the topic always holds a document of
// the cluster; zero for a compacted topic, one that keeps records for
// good, and until the first WriteDiscovery has checked the topic.
func (s *Sink) DiscoveryRefresh() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discoveryRefresh
}

// discoveryTopicConfigs are the configs of the discovery topic the sink
// creates, whatever the layout: compacted, so that it keeps the latest
// document of each cluster (its key) for good, and nothing older once the
// cleaner has passed.
var discoveryTopicConfigs = []kafkago.ConfigEntry{
	{ConfigName: configCleanupPolicy, ConfigValue: "compact"},
	{ConfigName: configRetentionMs, ConfigValue: "-1"},
}

// discoveryTopic is the topic of the discovery documents under the sink's
// BRIDGE_KAFKA_TOPIC_PREFIX.
func (s *Sink) discoveryTopic() string { return wire.DiscoveryTopic(s.cfg.TopicPrefix) }

// WriteDiscovery writes d to the topic wire.DiscoveryTopic(BRIDGE_KAFKA_TOPIC_PREFIX),
// keyed by d.Cluster, with the header content-type
// wire.DiscoveryContentType, and returns once it is acknowledged. The
// first call makes sure the topic exists, creating it, with one partition
// and compacted, when BRIDGE_KAFKA_CREATE_TOPICS is true (an error that
// names the topic otherwise; the next call checks again).
func (s *Sink) WriteDiscovery(ctx context.Context, d wire.Discovery) error {
	data, err := wire.MarshalDiscovery(d)
	if err != nil {
		return sink.Terminal(fmt.Errorf("kafka sink: %w", err))
	}
	topic := s.discoveryTopic()
	if err := s.ensureDiscoveryTopic(ctx, topic); err != nil {
		return err
	}
	rec := kafkago.Message{Topic: topic, Key: []byte(d.Cluster), Value: data,
		Headers: []kafkago.Header{{Key: wire.Kafka.ContentTypeHeader(), Value: []byte(wire.DiscoveryContentType)}}}
	if n := recordSize(&rec); n > s.cfg.MaxMessageBytes {
		return sink.TooLarge(fmt.Errorf("kafka sink: the discovery document of cluster %q is %d bytes, more than BRIDGE_KAFKA_MAX_MESSAGE_BYTES=%d", d.Cluster, n, s.cfg.MaxMessageBytes))
	}
	if errs := s.write(ctx, []kafkago.Message{rec}); errs[0] != nil {
		return errs[0]
	}
	return nil
}

// ensureDiscoveryTopic makes sure topic exists, once.
func (s *Sink) ensureDiscoveryTopic(ctx context.Context, topic string) error {
	s.mu.Lock()
	ready := s.discoveryReady
	s.mu.Unlock()
	if ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	spec := kafkago.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: s.cfg.ReplicationFactor, ConfigEntries: discoveryTopicConfigs}
	created, err := kafkaconn.EnsureTopics(ctx, s.client(startTimeout), s.cfg.CreateTopics, []kafkago.TopicConfig{spec})
	if err != nil {
		return fmt.Errorf("kafka sink: discovery topic: brokers %s: %w", strings.Join(s.cfg.conn.Brokers(), ","), err)
	}
	var refresh time.Duration
	if len(created) > 0 {
		s.log.Info("created topic", "topic", topic, "of", "discovery documents", "partitions", 1, "replicationFactor", s.cfg.ReplicationFactor,
			"configs", configString(discoveryTopicConfigs))
		s.opts.compaction(topic, true)
	} else {
		refresh = s.checkDiscoveryCompaction(ctx, topic)
	}
	s.mu.Lock()
	s.discoveryReady = true
	s.discoveryRefresh = refresh
	s.mu.Unlock()
	return nil
}

// checkDiscoveryCompaction reads the cleanup policy and retention of the
// discovery topic, which existed, reports whether it is compacted, warns
// when it may delete the document, and returns DiscoveryRefresh: half its
// retention.ms when it deletes by time. Like checkCompaction, it never
// fails: the topic works, and what it holds is the operator's call.
func (s *Sink) checkDiscoveryCompaction(ctx context.Context, topic string) time.Duration {
	res, err := s.client(startTimeout).DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic,
		ResourceName: topic,
		ConfigNames:  []string{configCleanupPolicy, configRetentionMs, configRetentionBytes},
	}}})
	if err == nil && len(res.Resources) != 1 {
		err = errors.New("the broker described another number of topics than asked")
	}
	if err == nil {
		err = res.Resources[0].Error
	}
	if err != nil {
		s.log.Warn("cannot check that the discovery topic is compacted; if it deletes by time, the cluster's document expires with it", "topic", topic, "err", err)
		return 0
	}
	var policy, retention, retentionBytes string
	for _, e := range res.Resources[0].ConfigEntries {
		switch e.ConfigName {
		case configCleanupPolicy:
			policy = e.ConfigValue
		case configRetentionMs:
			retention = e.ConfigValue
		case configRetentionBytes:
			retentionBytes = e.ConfigValue
		}
	}
	compacted := hasPolicy(policy, "compact")
	s.opts.compaction(topic, compacted)
	if !hasPolicy(policy, "delete") && compacted {
		return 0
	}
	var refresh time.Duration
	if ms, err := strconv.ParseInt(strings.TrimSpace(retention), 10, 64); err == nil && ms > 0 {
		refresh = time.Duration(ms) * time.Millisecond / 2
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(retentionBytes), 10, 64); err == nil && n >= 0 {
		s.log.Warn("the discovery topic deletes by size: the cluster's document may be deleted; set cleanup.policy=compact and retention.ms=-1 on the topic",
			"topic", topic, "cleanupPolicy", policy, "retentionMs", retention, "retentionBytes", retentionBytes)
	}
	if refresh > 0 {
		s.log.Warn("the discovery topic deletes by time: the bridge writes the cluster's document again, unchanged, at half its retention, lest it expire; set cleanup.policy=compact and retention.ms=-1 on the topic",
			"topic", topic, "cleanupPolicy", policy, "retentionMs", retention, "every", refresh)
	}
	return refresh
}

// LastDiscovery returns the latest discovery document of cluster in the
// discovery topic, read to its end; false when the topic holds none or
// does not exist.
func (s *Sink) LastDiscovery(ctx context.Context, cluster string) (wire.Discovery, bool, error) {
	topic := s.discoveryTopic()
	client := s.client(stateReadTimeout)
	md, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return wire.Discovery{}, false, fmt.Errorf("kafka sink: metadata of topic %s: %w", topic, err)
	}
	if len(md.Topics) == 1 && errors.Is(md.Topics[0].Error, kafkago.UnknownTopicOrPartition) {
		return wire.Discovery{}, false, nil
	}
	var last []byte
	found := false
	err = s.cfg.Conn().ReadTopic(ctx, client, topic, func(m kafkago.Message) error {
		if string(m.Key) == cluster {
			last, found = m.Value, m.Value != nil
		}
		return nil
	})
	if err != nil {
		return wire.Discovery{}, false, fmt.Errorf("kafka sink: read topic %s: %w", topic, err)
	}
	if !found {
		return wire.Discovery{}, false, nil
	}
	d, err := wire.UnmarshalDiscovery(last)
	if err != nil {
		return wire.Discovery{}, false, fmt.Errorf("kafka sink: topic %s: %w", topic, err)
	}
	return d, true, nil
}
