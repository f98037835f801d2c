package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// Config is the Kafka sink's part of the bridge configuration, read from
// BRIDGE_KAFKA_* variables. Each field's env tag names its variable,
// envDefault gives its default and help its meaning for `bridge --help`.
// The checkpoint store in package kafkastore reads the connection settings
// (brokers, TLS, SASL) and the topic-creation settings from it too.
type Config struct {
	Brokers []string `env:"BRIDGE_KAFKA_BROKERS" help:"required with the kafka sink or checkpoint: comma-separated bootstrap brokers, host:port"`
	// Naming the bridge lets broker logs, metrics and quotas tell it apart.
	ClientID string `env:"BRIDGE_KAFKA_CLIENT_ID" envDefault:"kubebus-bridge" help:"client id the brokers see, for their logs, metrics and quotas"`

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
	Layout string `env:"BRIDGE_KAFKA_LAYOUT" envDefault:"state" help:"state: topics the bridge creates are compacted and kept forever (cleanup.policy=compact, retention.ms=-1), so each live object's latest record stays and a deleted object's tombstone goes after BRIDGE_KAFKA_DELETE_RETENTION; history: topics take the broker's defaults and BRIDGE_KAFKA_TOPIC_CONFIGS, every change for the retention"`
	// Kafka's own default for delete.retention.ms: a consumer that is
	// down for less than a day still sees every delete.
	DeleteRetention time.Duration `env:"BRIDGE_KAFKA_DELETE_RETENTION" envDefault:"24h" help:"state layout: how long a deleted object's tombstone stays after compaction reaches it (delete.retention.ms of the topics the bridge creates); a consumer away for longer reads the state afresh"`
	// No configs by default: created topics take the broker's defaults,
	// and in the state layout the layout's configs.
	TopicConfigs string `env:"BRIDGE_KAFKA_TOPIC_CONFIGS" help:"configs of topics the bridge creates, name=value,name=value (for example max.message.bytes=4194304,min.insync.replicas=2); on top of the state layout's, which they must not contradict"`

	// Structured mode is the CloudEvents JSON every other sink writes.
	CEMode string `env:"BRIDGE_KAFKA_CE_MODE" envDefault:"structured" help:"CloudEvents mode: structured (JSON event in the value) or binary (attributes in ce_ headers, data in the value)"`
	// Tombstones let compacted topics forget deleted objects.
	Tombstones bool `env:"BRIDGE_KAFKA_TOMBSTONES" envDefault:"true" help:"after a deleted event, publish a tombstone (same key, null value); required by the state layout"`

	// A change counts as delivered only once every in-sync replica has it:
	// with fewer acks a broker failure can lose what was acknowledged.
	RequiredAcks string `env:"BRIDGE_KAFKA_REQUIRED_ACKS" envDefault:"all" help:"acknowledgement a write waits for: all (every in-sync replica), one (the leader) or none"`
	// The pipeline's batch (BRIDGE_BATCH_SIZE, 500) fits in one produce
	// request per partition; kafka-go's own default is 100.
	BatchSize int `env:"BRIDGE_KAFKA_BATCH_SIZE" envDefault:"500" help:"most records in one produce request to one partition"`
	// Publish already hands over a whole batch, so the writer only lingers
	// to merge the batches of concurrent workers bound for one partition.
	// Each Publish waits up to this long for its last partial batch, so it
	// adds to latency: kafka-go's default of 1s would add a second to each.
	BatchTimeout time.Duration `env:"BRIDGE_KAFKA_BATCH_TIMEOUT" envDefault:"10ms" help:"longest a partial batch waits for more records before it is sent"`
	// Like the Java producer's default: nothing to configure on old brokers
	// and sizes stay predictable. lz4 or zstd cut network and disk for JSON.
	Compression string `env:"BRIDGE_KAFKA_COMPRESSION" envDefault:"none" help:"none, gzip, snappy, lz4 or zstd"`
	// Kafka's default message.max.bytes is 1048588: one MiB of records plus
	// the 12 bytes of a batch header the broker counts.
	MaxMessageBytes int `env:"BRIDGE_KAFKA_MAX_MESSAGE_BYTES" envDefault:"1048576" help:"largest record (key, value and headers, uncompressed) and produce batch sent; larger changes are published without the object's content (marked contentomitted)"`

	// TLS is off unless asked for, as on a default Kafka listener.
	TLS           bool   `env:"BRIDGE_KAFKA_TLS" envDefault:"false" help:"connect with TLS; on as well when any other BRIDGE_KAFKA_TLS_* variable is set"`
	TLSCAFile     string `env:"BRIDGE_KAFKA_TLS_CA_FILE" help:"PEM file of the CAs that sign the brokers' certificates; the system's CAs when unset"`
	TLSCertFile   string `env:"BRIDGE_KAFKA_TLS_CERT_FILE" help:"PEM client certificate, for brokers that require one (with BRIDGE_KAFKA_TLS_KEY_FILE)"`
	TLSKeyFile    string `env:"BRIDGE_KAFKA_TLS_KEY_FILE" help:"PEM private key of the client certificate"`
	TLSServerName string `env:"BRIDGE_KAFKA_TLS_SERVER_NAME" help:"name the brokers' certificates must carry; the broker's host when unset"`

	SASLMechanism string `env:"BRIDGE_KAFKA_SASL_MECHANISM" help:"SASL authentication: plain, scram-sha-256 or scram-sha-512; none when unset"`
	SASLUsername  string `env:"BRIDGE_KAFKA_SASL_USERNAME" help:"SASL user"`
	SASLPassword  Secret `env:"BRIDGE_KAFKA_SASL_PASSWORD" help:"SASL password; never logged"`
}

// Secret is a string that does not show itself: printed, logged or
// marshalled it reads "[redacted]" (or "" when empty).
type Secret string

const redacted = "[redacted]"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (JSON, YAML) from printing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Values of the enumerated settings.
const (
	ModeStructured = "structured"
	ModeBinary     = "binary"

	AcksAll  = "all"
	AcksOne  = "one"
	AcksNone = "none"

	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// minMessageBytes keeps BRIDGE_KAFKA_MAX_MESSAGE_BYTES from rejecting
// every change: no Kubernetes object encodes in less.
const minMessageBytes = 1024

// Validate reports every problem, joined; each error starts with the name
// of the variable at fault ("BRIDGE_KAFKA_BROKERS: ..."). No error quotes
// the SASL password.
func (c *Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	brokers := c.BrokerList()
	if len(brokers) == 0 {
		bad("BRIDGE_KAFKA_BROKERS", "required: name at least one broker, for example kafka-0.kafka:9092")
	}
	for _, b := range brokers {
		if err := checkBroker(b); err != nil {
			bad("BRIDGE_KAFKA_BROKERS", "%q: %v", b, err)
		}
	}
	if c.Topic != "" {
		if err := CheckTopicName(c.Topic); err != nil {
			bad("BRIDGE_KAFKA_TOPIC", "%v", err)
		}
	} else if err := CheckTopicName(c.TopicPrefix); err != nil {
		bad("BRIDGE_KAFKA_TOPIC_PREFIX", "%v", err)
	}
	if c.Partitions != -1 && (c.Partitions < 1 || c.Partitions > math.MaxInt32) {
		bad("BRIDGE_KAFKA_PARTITIONS", "must be -1 (the broker's default) or positive, got %d", c.Partitions)
	}
	if c.ReplicationFactor != -1 && (c.ReplicationFactor < 1 || c.ReplicationFactor > math.MaxInt16) {
		bad("BRIDGE_KAFKA_REPLICATION_FACTOR", "must be -1 (the broker's default) or positive, got %d", c.ReplicationFactor)
	}
	if _, err := ParseTopicConfigs(c.TopicConfigs); err != nil {
		bad("BRIDGE_KAFKA_TOPIC_CONFIGS", "%v", err)
	}
	errs = append(errs, c.layoutProblems()...)
	if c.CEMode != ModeStructured && c.CEMode != ModeBinary {
		bad("BRIDGE_KAFKA_CE_MODE", "%q is not a mode; use structured or binary", c.CEMode)
	}
	if _, err := c.requiredAcks(); err != nil {
		bad("BRIDGE_KAFKA_REQUIRED_ACKS", "%v", err)
	}
	if c.BatchSize < 1 {
		bad("BRIDGE_KAFKA_BATCH_SIZE", "must be positive, got %d", c.BatchSize)
	}
	if c.BatchTimeout <= 0 {
		// kafka-go would read zero as one second.
		bad("BRIDGE_KAFKA_BATCH_TIMEOUT", "must be positive, got %s", c.BatchTimeout)
	}
	if _, err := c.compression(); err != nil {
		bad("BRIDGE_KAFKA_COMPRESSION", "%v", err)
	}
	if c.MaxMessageBytes < minMessageBytes || c.MaxMessageBytes > math.MaxInt32 {
		bad("BRIDGE_KAFKA_MAX_MESSAGE_BYTES", "must be between %d and %d, got %d", minMessageBytes, math.MaxInt32, c.MaxMessageBytes)
	}
	if _, err := c.TLSConfig(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.saslProblems()...)
	return errors.Join(errs...)
}

// BrokerList is BRIDGE_KAFKA_BROKERS without blanks.
func (c *Config) BrokerList() []string {
	var out []string
	for _, b := range c.Brokers {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func checkBroker(b string) error {
	host, port, err := net.SplitHostPort(b)
	if err != nil {
		return errors.New("not host:port")
	}
	if host == "" {
		return errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a port number", port)
	}
	return nil
}

// saslMechanism is BRIDGE_KAFKA_SASL_MECHANISM in lower case, as Kafka's
// own upper-case names are accepted too.
func (c *Config) saslMechanism() string { return strings.ToLower(strings.TrimSpace(c.SASLMechanism)) }

func (c *Config) saslProblems() []error {
	var errs []error
	switch m := c.saslMechanism(); m {
	case "":
		if c.SASLUsername != "" || c.SASLPassword != "" {
			errs = append(errs, errors.New("BRIDGE_KAFKA_SASL_MECHANISM: required when a SASL user or password is set; use plain, scram-sha-256 or scram-sha-512"))
		}
		return errs
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_SASL_MECHANISM: %q is not a mechanism; use plain, scram-sha-256 or scram-sha-512", c.SASLMechanism))
	}
	if c.SASLUsername == "" {
		errs = append(errs, errors.New("BRIDGE_KAFKA_SASL_USERNAME: required with BRIDGE_KAFKA_SASL_MECHANISM"))
	}
	if c.SASLPassword == "" {
		errs = append(errs, errors.New("BRIDGE_KAFKA_SASL_PASSWORD: required with BRIDGE_KAFKA_SASL_MECHANISM"))
	}
	if len(errs) == 0 {
		if _, err := c.SASL(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
