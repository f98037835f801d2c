package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

var _ sink.DiscoveryWriter = (*Sink)(nil)

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
	if len(created) > 0 {
		s.log.Info("created topic", "topic", topic, "of", "discovery documents", "partitions", 1, "replicationFactor", s.cfg.ReplicationFactor,
			"configs", configString(discoveryTopicConfigs))
	}
	s.mu.Lock()
	s.discoveryReady = true
	s.mu.Unlock()
	return nil
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
