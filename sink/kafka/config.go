package kafka

import (
	"math"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/wire"
)

// Config is the Kafka sink's part of the bridge configuration, read from
// BRIDGE_KAFKA_* variables. Each field's env tag names its variable,
// envDefault gives its default and help its meaning for `bridge --help`.
// The connection settings (brokers, TLS, SASL) are kafkaconn's, which the
// checkpoint store in package kafkastore shares. Parse turns a Config into
// the Parsed that New takes. Written by hand, start from DefaultConfig,
// which holds the defaults of the tags.
type Config struct {
	kafkaconn.Config

	// "kube" gives topics such as kube.configmaps that say where they come
	// from.
	TopicPrefix string `env:"BRIDGE_KAFKA_TOPIC_PREFIX" envDefault:"kube" help:"topics are <prefix>.<resource> (core group) or <prefix>.<resource>.<group>"`
	Topic       string `env:"BRIDGE_KAFKA_TOPIC" help:"one topic for every resource instead of one per resource; keys are then <resource>/<namespace>/<name>"`
	// Creating missing topics lets a new cluster work at once; turn it off
	// where topics are provisioned by someone else, and a missing one then
	// stops the bridge at start-up.
	CreateTopics bool `env:"BRIDGE_KAFKA_CREATE_TOPICS" envDefault:"true" help:"create missing topics at start-up; when false a missing topic is an error"`
	// -1 leaves the number to the broker's num.partitions, which its
	// operator chose for the cluster.
	Partitions int `env:"BRIDGE_KAFKA_PARTITIONS" envDefault:"-1" help:"partitions of topics the bridge creates; -1 is the broker's num.partitions"`
	// -1 leaves it to the broker's default.replication.factor, which fits
	// the cluster's size (1 on a single-broker development cluster).
	ReplicationFactor int `env:"BRIDGE_KAFKA_REPLICATION_FACTOR" envDefault:"-1" help:"replication factor of topics the bridge creates; -1 is the broker's default.replication.factor"`
	// The state layout lets a consumer that starts at any time read every
	// live object from the topic alone; history is the old behaviour, for
	// those who want every change for the broker's retention.
	Layout Layout `env:"BRIDGE_KAFKA_LAYOUT" envDefault:"state" help:"state: topics the bridge creates are compacted and kept forever (cleanup.policy=compact, retention.ms=-1), so each live object's latest record stays and a deleted object's tombstone goes after BRIDGE_KAFKA_DELETE_RETENTION; history: topics take the broker's defaults and BRIDGE_KAFKA_TOPIC_CONFIGS, every change for the retention"`
	// Kafka's own default for delete.retention.ms: a consumer that is
	// down for less than a day still sees every delete.
	DeleteRetention time.Duration `env:"BRIDGE_KAFKA_DELETE_RETENTION" envDefault:"24h" help:"state layout: how long a deleted object's tombstone stays after compaction reaches it (delete.retention.ms of the topics the bridge creates); a consumer away for longer reads the state afresh"`
	// No configs by default: created topics take the broker's defaults,
	// and in the state layout the layout's configs.
	TopicConfigs string `env:"BRIDGE_KAFKA_TOPIC_CONFIGS" help:"configs of topics the bridge creates, name=value,name=value (for example max.message.bytes=4194304,min.insync.replicas=2); on top of the state layout's, which they must not contradict"`

	// Structured mode is the CloudEvents JSON every other sink writes.
	CEMode CEMode `env:"BRIDGE_KAFKA_CE_MODE" envDefault:"structured" help:"CloudEvents mode: structured (JSON event in the value) or binary (attributes in ce_ headers, data in the value)"`
	// Tombstones let compacted topics forget deleted objects.
	Tombstones bool `env:"BRIDGE_KAFKA_TOMBSTONES" envDefault:"true" help:"after a deleted event, publish a tombstone (same key, null value); required by the state layout"`

	// A change counts as delivered only once every in-sync replica has it:
	// with fewer acks a broker failure can lose what was acknowledged.
	RequiredAcks Acks `env:"BRIDGE_KAFKA_REQUIRED_ACKS" envDefault:"all" help:"acknowledgement a write waits for: all (every in-sync replica), one (the leader) or none"`
	// The pipeline's batch (BRIDGE_BATCH_SIZE, 500) fits in one produce
	// request per partition; kafka-go's own default is 100.
	BatchSize int `env:"BRIDGE_KAFKA_BATCH_SIZE" envDefault:"500" help:"most records in one produce request to one partition"`
	// A change bound for a broker with no request in flight leaves at once;
	// those that come while one is in flight wait for its answer and go
	// together in the next request, unless they waited this long, when
	// another request goes beside it. So it bounds the wait behind a slow
	// broker without delaying a lone change. The Kafka checkpoint store
	// (BRIDGE_CHECKPOINT=kafka) writes through kafka-go's Writer, which
	// holds each partial batch this long.
	BatchTimeout time.Duration `env:"BRIDGE_KAFKA_BATCH_TIMEOUT" envDefault:"10ms" help:"longest records wait behind a produce request in flight to their broker before another request takes them; a change to a broker with none in flight leaves at once (the Kafka checkpoint store holds a partial batch this long)"`
	// Like the Java producer's default: nothing to configure on old brokers
	// and sizes stay predictable. lz4 or zstd cut network and disk for JSON.
	Compression Codec `env:"BRIDGE_KAFKA_COMPRESSION" envDefault:"none" help:"none, gzip, snappy, lz4 or zstd"`
	// Kafka's default message.max.bytes is 1048588: one MiB of records plus
	// the 12 bytes of a batch header the broker counts.
	MaxMessageBytes int `env:"BRIDGE_KAFKA_MAX_MESSAGE_BYTES" envDefault:"1048576" help:"largest record (key, value and headers, uncompressed) and produce batch sent; larger changes are published without the object's content (marked contentomitted)"`
}

// CEMode is a CloudEvents content mode (BRIDGE_KAFKA_CE_MODE).
type CEMode string

// Content modes.
const (
	ModeStructured CEMode = "structured"
	ModeBinary     CEMode = "binary"
)

// Acks is the acknowledgement a write waits for (BRIDGE_KAFKA_REQUIRED_ACKS).
type Acks string

// Acknowledgements, and what kafka-go calls them.
const (
	AcksAll  Acks = "all"
	AcksOne  Acks = "one"
	AcksNone Acks = "none"
)

var requiredAcks = map[Acks]kafkago.RequiredAcks{AcksAll: kafkago.RequireAll, AcksOne: kafkago.RequireOne, AcksNone: kafkago.RequireNone}

// Codec is a compression codec (BRIDGE_KAFKA_COMPRESSION).
type Codec string

// Codecs, and what kafka-go calls them; 0 is none.
const (
	CodecNone   Codec = "none"
	CodecGzip   Codec = "gzip"
	CodecSnappy Codec = "snappy"
	CodecLz4    Codec = "lz4"
	CodecZstd   Codec = "zstd"
)

var codecs = map[Codec]kafkago.Compression{CodecNone: 0, CodecGzip: kafkago.Gzip, CodecSnappy: kafkago.Snappy, CodecLz4: kafkago.Lz4, CodecZstd: kafkago.Zstd}

// minMessageBytes keeps BRIDGE_KAFKA_MAX_MESSAGE_BYTES from rejecting
// every change: no Kubernetes object encodes in less.
const minMessageBytes = 1024

// DefaultConfig is the Config of an environment that sets none of its
// variables: every field at its envDefault. Only the brokers are left to
// name.
func DefaultConfig() Config {
	var c Config
	envvar.Defaults(&c)
	return c
}

// Parsed is a Config parsed and checked by Parse: what New takes. The
// Config's fields read as they were given; what needed parsing (the
// connection, the acks, the codec, the configs of created topics) is
// parsed once, here.
type Parsed struct {
	Config
	conn         *kafkaconn.Conn
	acks         kafkago.RequiredAcks
	codec        kafkago.Compression
	createConfig []kafkago.ConfigEntry
}

// Conn is the connection to the brokers.
func (s *Parsed) Conn() *kafkaconn.Conn { return s.conn }

// Parse checks c and parses it into Parsed. It reports every problem,
// joined, each an *envvar.Error naming its variable; none quotes the SASL
// password.
func (c *Config) Parse() (*Parsed, error) {
	var p envvar.Problems
	conn, err := c.Config.Parse()
	p.Join(err)
	if c.Topic != "" {
		if err := wire.CheckTopicName(c.Topic); err != nil {
			p.Add("BRIDGE_KAFKA_TOPIC", "%v", err)
		}
	} else if err := wire.CheckTopicName(c.TopicPrefix); err != nil {
		p.Add("BRIDGE_KAFKA_TOPIC_PREFIX", "%v", err)
	}
	if c.Partitions != -1 && (c.Partitions < 1 || c.Partitions > math.MaxInt32) {
		p.Add("BRIDGE_KAFKA_PARTITIONS", "must be -1 (the broker's default) or positive, got %d", c.Partitions)
	}
	if c.ReplicationFactor != -1 && (c.ReplicationFactor < 1 || c.ReplicationFactor > math.MaxInt16) {
		p.Add("BRIDGE_KAFKA_REPLICATION_FACTOR", "must be -1 (the broker's default) or positive, got %d", c.ReplicationFactor)
	}
	extra, err := ParseTopicConfigs(c.TopicConfigs)
	if err != nil {
		p.Add("BRIDGE_KAFKA_TOPIC_CONFIGS", "%v", err)
	}
	c.checkLayout(&p, extra, err == nil)
	if c.CEMode != ModeStructured && c.CEMode != ModeBinary {
		p.Add("BRIDGE_KAFKA_CE_MODE", "%q is not a mode; use structured or binary", c.CEMode)
	}
	a, ok := requiredAcks[c.RequiredAcks]
	if !ok {
		p.Add("BRIDGE_KAFKA_REQUIRED_ACKS", "%q is not an acknowledgement; use all, one or none", c.RequiredAcks)
	}
	if c.BatchSize < 1 {
		p.Add("BRIDGE_KAFKA_BATCH_SIZE", "must be positive, got %d", c.BatchSize)
	}
	if c.BatchTimeout <= 0 {
		// kafka-go would read zero as one second.
		p.Add("BRIDGE_KAFKA_BATCH_TIMEOUT", "must be positive, got %s", c.BatchTimeout)
	}
	codec, ok := codecs[c.Compression]
	if !ok {
		p.Add("BRIDGE_KAFKA_COMPRESSION", "%q is not a codec; use none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	if c.MaxMessageBytes < minMessageBytes || c.MaxMessageBytes > math.MaxInt32 {
		p.Add("BRIDGE_KAFKA_MAX_MESSAGE_BYTES", "must be between %d and %d, got %d", minMessageBytes, math.MaxInt32, c.MaxMessageBytes)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return &Parsed{Config: *c, conn: conn, acks: a, codec: codec, createConfig: c.createConfigs(extra)}, nil
}
