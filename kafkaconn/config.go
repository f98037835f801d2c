package kafkaconn

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/kubebus/bridge/envvar"
)

// Config is the connection's part of the BRIDGE_KAFKA_* variables. Each
// field's env tag names its variable, envDefault gives its default and help
// its meaning for `bridge --help`. Written by hand, start from
// DefaultConfig, which holds those defaults.
type Config struct {
	Brokers []string `env:"BRIDGE_KAFKA_BROKERS" help:"required with the kafka sink or checkpoint: comma-separated bootstrap brokers, host:port"`
	// Naming the bridge lets broker logs, metrics and quotas tell it apart.
	ClientID string `env:"BRIDGE_KAFKA_CLIENT_ID" envDefault:"kubebus-bridge" help:"client id the brokers see, for their logs, metrics and quotas"`

	// TLS is off unless asked for, as on a default Kafka listener.
	TLS           bool            `env:"BRIDGE_KAFKA_TLS" envDefault:"false" help:"connect with TLS; on as well when any other BRIDGE_KAFKA_TLS_* variable is set"`
	TLSFiles      envvar.TLSFiles `envPrefix:"BRIDGE_KAFKA_"`
	TLSServerName string          `env:"BRIDGE_KAFKA_TLS_SERVER_NAME" help:"name the brokers' certificates must carry; the broker's host when unset"`

	SASLMechanism string        `env:"BRIDGE_KAFKA_SASL_MECHANISM" help:"SASL authentication: plain, scram-sha-256 or scram-sha-512; none when unset"`
	SASLUsername  string        `env:"BRIDGE_KAFKA_SASL_USERNAME" help:"SASL user"`
	SASLPassword  envvar.Secret `env:"BRIDGE_KAFKA_SASL_PASSWORD" help:"SASL password; never logged"`
}

// DefaultConfig is the Config of an environment that sets none of its
// variables: every field at its envDefault.
func DefaultConfig() Config {
	var c Config
	envvar.Defaults(&c)
	return c
}

// SASL mechanisms (BRIDGE_KAFKA_SASL_MECHANISM, in any case).
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// bridgePrefix starts the name of every variable of Config.
const bridgePrefix = "BRIDGE_KAFKA_"

// Parse checks c and makes its Conn: the TLS files read, the SASL
// mechanism made. It reports every problem, joined, each an *envvar.Error
// naming its variable; none quotes the SASL password.
func (c *Config) Parse() (*Conn, error) { return c.ParseAs(bridgePrefix) }

// ParseAs is Parse for a program that reads the same settings from
// variables of its own: each *envvar.Error names its variable with prefix
// (such as "REPLICA_KAFKA_") in place of BRIDGE_KAFKA_, the rest of the name
// unchanged (BROKERS, TLS_CA_FILE, SASL_MECHANISM...).
func (c *Config) ParseAs(prefix string) (*Conn, error) {
	var p envvar.Problems
	conn := &Conn{clientID: c.ClientID, mechanism: strings.ToLower(strings.TrimSpace(c.SASLMechanism))}
	for _, b := range c.Brokers {
		if b = strings.TrimSpace(b); b != "" {
			conn.brokers = append(conn.brokers, b)
		}
	}
	if len(conn.brokers) == 0 {
		p.Add(prefix+"BROKERS", "required: name at least one broker, for example kafka-0.kafka:9092")
	}
	for _, b := range conn.brokers {
		if err := checkBroker(b); err != nil {
			p.Add(prefix+"BROKERS", "%q: %v", b, err)
		}
	}
	if c.TLS || c.TLSFiles.Set() || c.TLSServerName != "" {
		tc, err := c.TLSFiles.Config(prefix, c.TLSServerName)
		p.Join(err)
		conn.tls = tc
	}
	m, km, err := c.sasl(prefix, conn.mechanism)
	p.Join(err)
	conn.sasl, conn.kgoSASL = m, km
	if err := p.Err(); err != nil {
		return nil, err
	}
	return conn, nil
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

// sasl makes the SASL mechanism of c for kafka-go and for franz-go, or
// nils when none is configured.
func (c *Config) sasl(prefix, mechanism string) (sasl.Mechanism, kgosasl.Mechanism, error) {
	var p envvar.Problems
	const mechanisms = "use plain, scram-sha-256 or scram-sha-512"
	var algo scram.Algorithm
	switch mechanism {
	case "":
		if c.SASLUsername != "" || c.SASLPassword != "" {
			p.Add(prefix+"SASL_MECHANISM", "required when a SASL user or password is set; %s", mechanisms)
		}
		return nil, nil, p.Err()
	case SASLPlain:
	case SASLScramSHA256:
		algo = scram.SHA256
	case SASLScramSHA512:
		algo = scram.SHA512
	default:
		p.Add(prefix+"SASL_MECHANISM", "%q is not a mechanism; %s", c.SASLMechanism, mechanisms)
	}
	if c.SASLUsername == "" {
		p.Add(prefix+"SASL_USERNAME", "required with %sSASL_MECHANISM", prefix)
	}
	if c.SASLPassword == "" {
		p.Add(prefix+"SASL_PASSWORD", "required with %sSASL_MECHANISM", prefix)
	}
	if len(p) > 0 {
		return nil, nil, p.Err()
	}
	if mechanism == SASLPlain {
		return redacted{plain.Mechanism{Username: c.SASLUsername, Password: string(c.SASLPassword)}}, kgoSASL(mechanism, c.SASLUsername, c.SASLPassword), nil
	}
	m, err := scram.Mechanism(algo, c.SASLUsername, string(c.SASLPassword))
	if err != nil {
		// The SCRAM library's error may quote what it rejected.
		p.Add(prefix+"SASL_USERNAME", "the user name or password is not valid for SCRAM (SASLprep rejects it)")
		return nil, nil, p.Err()
	}
	return redacted{m}, kgoSASL(mechanism, c.SASLUsername, c.SASLPassword), nil
}
