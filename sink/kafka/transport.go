package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Connection timings, the same for the sink and the checkpoint store.
const (
	// dialTimeout bounds a connection's set-up: TCP, TLS and SASL.
	dialTimeout = 10 * time.Second
	// keepAlive lets the OS notice brokers that vanished without a FIN.
	keepAlive = 30 * time.Second
	// metadataTTL is how stale kafka-go's view of partition leaders may
	// get. kafka-go does not refresh it when a write fails with "not
	// leader", so after a leader moves writes fail until the next refresh:
	// a short TTL shortens that, and with the metadata limited to the
	// bridge's own topics a refresh is cheap. (kafka-go's default is 6s.)
	metadataTTL = 3 * time.Second
)

// NewTransport returns a kafka-go Transport for cfg's brokers, TLS and SASL
// settings. Its cached metadata covers only topics (all of the cluster's
// when nil). The transport's background work stops when ctx ends; call its
// CloseIdleConnections as well when done with it.
func NewTransport(ctx context.Context, cfg Config, topics []string) (*kafkago.Transport, error) {
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	mechanism, err := cfg.SASL()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &kafkago.Transport{
		Dial:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}).DialContext,
		DialTimeout:    dialTimeout,
		MetadataTTL:    metadataTTL,
		MetadataTopics: topics,
		ClientID:       cfg.ClientID,
		TLS:            tlsConfig,
		SASL:           mechanism,
		Context:        ctx,
	}, nil
}

// NewDialer returns a kafka-go Dialer (for kafka-go's Conn and Reader) with
// cfg's client id, TLS and SASL settings.
func NewDialer(cfg Config) (*kafkago.Dialer, error) {
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	mechanism, err := cfg.SASL()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &kafkago.Dialer{
		ClientID:      cfg.ClientID,
		Timeout:       dialTimeout,
		KeepAlive:     keepAlive,
		DualStack:     true,
		TLS:           tlsConfig,
		SASLMechanism: mechanism,
	}, nil
}

// Addr is cfg's bootstrap brokers as a kafka-go address.
func Addr(cfg Config) net.Addr { return kafkago.TCP(cfg.BrokerList()...) }

// TLSConfig returns the TLS settings, or nil when TLS is off. TLS is on
// when BRIDGE_KAFKA_TLS is true or any BRIDGE_KAFKA_TLS_* file is set.
// Errors name the variable at fault.
func (c *Config) TLSConfig() (*tls.Config, error) {
	if !c.TLS && c.TLSCAFile == "" && c.TLSCertFile == "" && c.TLSKeyFile == "" && c.TLSServerName == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	var errs []error
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_TLS_CA_FILE: %w", err))
		} else {
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_TLS_CA_FILE: %s holds no PEM certificate", c.TLSCAFile))
			}
		}
	}
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile != "":
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_TLS_CERT_FILE: with BRIDGE_KAFKA_TLS_KEY_FILE: %w", err))
		} else {
			tc.Certificates = []tls.Certificate{cert}
		}
	case c.TLSCertFile != "":
		errs = append(errs, errors.New("BRIDGE_KAFKA_TLS_KEY_FILE: required with BRIDGE_KAFKA_TLS_CERT_FILE"))
	case c.TLSKeyFile != "":
		errs = append(errs, errors.New("BRIDGE_KAFKA_TLS_CERT_FILE: required with BRIDGE_KAFKA_TLS_KEY_FILE"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tc, nil
}

// SASL returns the SASL mechanism, or nil when none is configured. Errors
// name the variable at fault and never quote the password.
func (c *Config) SASL() (sasl.Mechanism, error) {
	var algo scram.Algorithm
	switch c.saslMechanism() {
	case "":
		return nil, nil
	case SASLPlain:
		return plain.Mechanism{Username: c.SASLUsername, Password: string(c.SASLPassword)}, nil
	case SASLScramSHA256:
		algo = scram.SHA256
	case SASLScramSHA512:
		algo = scram.SHA512
	default:
		return nil, fmt.Errorf("BRIDGE_KAFKA_SASL_MECHANISM: %q is not a mechanism", c.SASLMechanism)
	}
	m, err := scram.Mechanism(algo, c.SASLUsername, string(c.SASLPassword))
	if err != nil {
		// The SCRAM library's error may quote what it rejected.
		return nil, errors.New("BRIDGE_KAFKA_SASL_USERNAME: the user name or password is not valid for SCRAM (SASLprep rejects it)")
	}
	return m, nil
}

// requiredAcks is BRIDGE_KAFKA_REQUIRED_ACKS for kafka-go.
func (c *Config) requiredAcks() (kafkago.RequiredAcks, error) {
	switch c.RequiredAcks {
	case AcksAll:
		return kafkago.RequireAll, nil
	case AcksOne:
		return kafkago.RequireOne, nil
	case AcksNone:
		return kafkago.RequireNone, nil
	}
	return 0, fmt.Errorf("%q is not an acknowledgement; use all, one or none", c.RequiredAcks)
}

// compression is BRIDGE_KAFKA_COMPRESSION for kafka-go; 0 is none.
func (c *Config) compression() (kafkago.Compression, error) {
	switch c.Compression {
	case "none":
		return 0, nil
	case "gzip":
		return kafkago.Gzip, nil
	case "snappy":
		return kafkago.Snappy, nil
	case "lz4":
		return kafkago.Lz4, nil
	case "zstd":
		return kafkago.Zstd, nil
	}
	return 0, fmt.Errorf("%q is not a codec; use none, gzip, snappy, lz4 or zstd", c.Compression)
}
