package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

const (
	// startTimeout bounds New's talk with the brokers, so that a cluster
	// that accepts connections but never answers fails the start-up
	// instead of hanging it.
	startTimeout = 30 * time.Second
	// healthTimeout bounds Health's round trip.
	healthTimeout = 5 * time.Second
	// writeAttempts is how often the sink sends a record before it reports
	// the failure. A few quick tries ride out a leader election; after them
	// the pipeline retries with its own, longer, backoff.
	writeAttempts = 3
	// writeBackoffMin and writeBackoffMax bound the wait between two tries,
	// as kafka-go's Writer did by default.
	writeBackoffMin = 100 * time.Millisecond
	writeBackoffMax = time.Second
	// writeTimeout bounds one produce request, like the Java producer's
	// request.timeout.ms.
	writeTimeout = 30 * time.Second
)

// Sink publishes messages to Kafka. It is safe for concurrent use: each
// Publish writes its own batch, and batches of different goroutines share
// produce requests when they go to the same broker at the same time (see
// producer).
type Sink struct {
	cfg  *Parsed
	log  *slog.Logger
	addr net.Addr

	transport *kafkago.Transport
	stop      context.CancelFunc // ends the transport's background work
	// p writes every record.
	p    *producer
	opts options

	// mu guards topics, the topics known to exist, discoveryReady,
	// whether the discovery topic is known to exist, and
	// discoveryRefresh, DiscoveryRefresh once it is.
	mu               sync.Mutex
	topics           []string
	discoveryReady   bool
	discoveryRefresh time.Duration
	// health is the outcome of the last talk with the brokers.
	health health

	closeOnce sync.Once
	closeErr  error
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
	_ sink.Preparer      = (*Sink)(nil)
)

// New connects to the brokers and makes sure the topic of every resource
// (or the single BRIDGE_KAFKA_TOPIC) exists, creating missing ones when
// BRIDGE_KAFKA_CREATE_TOPICS is true. A missing topic otherwise fails New
// with an error that names it.
//
// In the state layout (BRIDGE_KAFKA_LAYOUT) topics it creates are
// compacted; an existing topic that is not is used as it is, with a
// warning (and a report, see [Options].TopicCompaction).
//
// cfg is what Config.Parse returned; New checks none of it again.
func New(ctx context.Context, cfg *Parsed, resources []schema.GroupVersionResource, opts Options, log *slog.Logger) (*Sink, error) {
	if cfg == nil || cfg.conn == nil {
		return nil, errors.New("kafka sink: configuration not parsed by Config.Parse")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := options{compaction: opts.TopicCompaction, added: opts.ResourcesAdded}
	if o.compaction == nil {
		o.compaction = func(string, bool) {}
	}
	topics, err := topicsOf(&cfg.Config, resources)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}

	// The transport outlives New's context: the pipeline drains after the
	// bridge's context has ended. Its metadata covers the sink's topics,
	// or every topic when more may come.
	metadataTopics := append(slices.Clone(topics), wire.DiscoveryTopic(cfg.TopicPrefix))
	if o.added {
		metadataTopics = nil
	}
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	conn := cfg.Conn()
	transport := conn.Transport(tctx, metadataTopics)
	s := &Sink{cfg: cfg, log: log, addr: conn.Addr(), transport: transport, stop: stop, opts: o}

	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.ensureTopics(sctx, topics); err != nil {
		s.closeTransport()
		return nil, err
	}

	s.p = &producer{
		transport:  transport,
		addr:       s.addr,
		acks:       cfg.acks,
		attributes: protocol.Attributes(cfg.codec) & 0x7,
		batchSize:  cfg.BatchSize,
		batchBytes: cfg.MaxMessageBytes,
		linger:     cfg.BatchTimeout,
		timeout:    writeTimeout,
	}
	if cfg.acks != kafkago.RequireAll {
		log.Warn("BRIDGE_KAFKA_REQUIRED_ACKS is not all: a broker failure can lose changes the bridge counted as delivered", "acks", cfg.RequiredAcks)
	}
	if conn.SASLMechanism() == kafkaconn.SASLPlain && !conn.TLS() {
		log.Warn("SASL PLAIN without TLS sends the password in clear text; set BRIDGE_KAFKA_TLS=true")
	}
	log.Info("kafka sink ready", "brokers", conn.Brokers(), "topics", topics, "layout", cfg.Layout, "mode", cfg.CEMode,
		"tombstones", cfg.Tombstones, "acks", cfg.RequiredAcks, "compression", cfg.Compression,
		"tls", conn.TLS(), "sasl", conn.SASLMechanism())
	return s, nil
}

// ensureTopics makes sure topics exist, as New says, and records them.
func (s *Sink) ensureTopics(ctx context.Context, topics []string) error {
	configs := s.cfg.createConfig
	specs := make([]kafkago.TopicConfig, len(topics))
	for i, t := range topics {
		specs[i] = kafkago.TopicConfig{
			Topic:             t,
			NumPartitions:     s.cfg.Partitions,
			ReplicationFactor: s.cfg.ReplicationFactor,
			ConfigEntries:     configs,
		}
	}
	created, err := kafkaconn.EnsureTopics(ctx, s.client(startTimeout), s.cfg.CreateTopics, specs)
	if err != nil {
		return fmt.Errorf("kafka sink: brokers %s: %w", strings.Join(s.cfg.conn.Brokers(), ","), err)
	}
	for _, t := range created {
		s.log.Info("created topic", "topic", t, "layout", s.cfg.Layout, "partitions", s.cfg.Partitions, "replicationFactor", s.cfg.ReplicationFactor,
			"configs", configString(configs))
	}
	if s.cfg.Layout == LayoutState {
		var existing []string
		for _, t := range topics {
			if slices.Contains(created, t) {
				s.opts.compaction(t, true)
			} else {
				existing = append(existing, t)
			}
		}
		checkCompaction(ctx, s.client(startTimeout), existing, s.log, s.opts.compaction)
	}
	s.mu.Lock()
	for _, t := range topics {
		if !slices.Contains(s.topics, t) {
			s.topics = append(s.topics, t)
		}
	}
	s.mu.Unlock()
	return nil
}

// Prepare makes sure the topic of resource exists, as New does for the
// resources it is given (creating it when BRIDGE_KAFKA_CREATE_TOPICS is
// true). A resource New was not given needs Options.ResourcesAdded.
func (s *Sink) Prepare(ctx context.Context, resource schema.GroupVersionResource) error {
	topics, err := topicsOf(&s.cfg.Config, []schema.GroupVersionResource{resource})
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	s.mu.Lock()
	known := slices.Contains(s.topics, topics[0])
	s.mu.Unlock()
	if known {
		return nil
	}
	if !s.opts.added {
		return fmt.Errorf("kafka sink: topic %s of %s: the sink was made for other resources only (see Options.ResourcesAdded)", topics[0], resource.GroupResource())
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return s.ensureTopics(ctx, topics)
}

// configString writes topic configs as BRIDGE_KAFKA_TOPIC_CONFIGS takes
// them, for the log.
func configString(configs []kafkago.ConfigEntry) string {
	parts := make([]string, len(configs))
	for i, e := range configs {
		parts[i] = e.ConfigName + "=" + e.ConfigValue
	}
	return strings.Join(parts, ",")
}

// topicsOf lists the topics of resources, each once: the single
// BRIDGE_KAFKA_TOPIC (checked by Parse), or one per resource.
func topicsOf(cfg *Config, resources []schema.GroupVersionResource) ([]string, error) {
	var topics []string
	if cfg.Topic != "" {
		topics = append(topics, cfg.Topic)
	}
	for _, r := range resources {
		t := cfg.TopicOf(r)
		if slices.Contains(topics, t) {
			continue
		}
		// A custom resource's group may be 253 characters, which with the
		// prefix and the resource passes Kafka's limit.
		if err := wire.CheckTopicName(t); err != nil {
			return nil, &envvar.Error{Var: "BRIDGE_KAFKA_TOPIC_PREFIX", Err: fmt.Errorf("resource %s: %w; use a shorter prefix, or one topic for every resource (BRIDGE_KAFKA_TOPIC)", r.GroupResource(), err)}
		}
		topics = append(topics, t)
	}
	return topics, nil
}

func (s *Sink) client(timeout time.Duration) *kafkago.Client {
	return &kafkago.Client{Addr: s.addr, Transport: s.transport, Timeout: timeout}
}

// Close sends what is queued, waits for writes in flight and releases the
// connections. It waits until they end or ctx does, whichever comes
// first: at ctx's end Close stops waiting for them, releases what it can
// and says so. A write still in flight then was never confirmed to the
// pipeline, so it was never checkpointed: the next start publishes it
// again. Calling Close more than once is harmless; later calls return the
// first's error.
func (s *Sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.p != nil {
			if err := s.p.close(ctx); err != nil {
				s.closeErr = fmt.Errorf("kafka sink: close: writes still in flight at the deadline, left unconfirmed: %w", err)
			}
		}
		s.closeTransport()
	})
	return s.closeErr
}

func (s *Sink) closeTransport() {
	s.stop()
	s.transport.CloseIdleConnections()
}
