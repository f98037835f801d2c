package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/kafkaconn"
)

// The replica's clients of the bus, with the credentials and TLS of the
// REPLICA_NATS_* and REPLICA_KAFKA_* variables. Their meanings are the
// bridges' (BRIDGE_NATS_*, BRIDGE_KAFKA_*), so that one Secret of
// credentials serves both. No secret is logged or put in an error.

// clientName names the replica's connections in the servers' monitoring
// and the brokers' logs.
const clientName = "kubebus-replica"

// connectNATS connects to REPLICA_NATS_URL with the credentials and TLS
// of c, reconnecting forever once connected. It fails when no server can
// be reached or the server refuses the credentials.
func connectNATS(c Config) (*nats.Conn, error) {
	auth, err := c.natsAuth()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.NATSURL, append([]nats.Option{nats.Name(clientName), nats.MaxReconnects(-1)}, auth...)...)
	if err != nil {
		return nil, fmt.Errorf("REPLICA_NATS_URL: %w", err)
	}
	return nc, nil
}

// natsAuth checks the REPLICA_NATS_* credentials and TLS files and turns
// them into nats.go options, as the bridge's NATS sink does: at most one
// way to authenticate; TLS on when a TLS file is named (or the URL is
// tls://). Every problem names its variable.
func (c Config) natsAuth() ([]nats.Option, error) {
	var p envvar.Problems
	switch {
	case c.NATSUser != "" && c.NATSPassword == "":
		p.Add("REPLICA_NATS_PASSWORD", "required with REPLICA_NATS_USER")
	case c.NATSUser == "" && c.NATSPassword != "":
		p.Add("REPLICA_NATS_USER", "required with REPLICA_NATS_PASSWORD")
	}
	var methods []string
	for _, m := range []struct{ name, value string }{
		{"REPLICA_NATS_USER", c.NATSUser}, {"REPLICA_NATS_TOKEN", string(c.NATSToken)},
		{"REPLICA_NATS_NKEY_SEED_FILE", c.NATSNKeySeedFile}, {"REPLICA_NATS_CREDS_FILE", c.NATSCredsFile},
	} {
		if m.value != "" {
			methods = append(methods, m.name)
		}
	}
	if len(methods) > 1 {
		p.Add(methods[1], "set together with %s; choose one way to authenticate", strings.Join(append(methods[:1:1], methods[2:]...), " and "))
	}
	var opts []nats.Option
	switch {
	case c.NATSUser != "":
		opts = append(opts, nats.UserInfo(c.NATSUser, string(c.NATSPassword)))
	case c.NATSToken != "":
		opts = append(opts, nats.Token(string(c.NATSToken)))
	case c.NATSNKeySeedFile != "":
		// The option reads the seed again for each signature, so that it
		// is not kept in memory.
		o, err := nats.NkeyOptionFromSeed(c.NATSNKeySeedFile)
		if err != nil {
			p.Add("REPLICA_NATS_NKEY_SEED_FILE", "%v", err)
		}
		opts = append(opts, o)
	case c.NATSCredsFile != "":
		// Read at every connect, so that rotated credentials are taken up.
		if _, err := os.Stat(c.NATSCredsFile); err != nil {
			p.Add("REPLICA_NATS_CREDS_FILE", "%v", err)
		}
		opts = append(opts, nats.UserCredentials(c.NATSCredsFile))
	}
	if f := c.NATSTLSFiles; f.Set() {
		// The server's name comes from the URL of each server.
		tc, err := f.Config("REPLICA_NATS_", "")
		p.Join(err)
		opts = append(opts, nats.Secure(tc))
		// Read again at every connect, so that renewed certificates are
		// taken up at the next reconnect.
		if f.CAFile != "" {
			opts = append(opts, nats.RootCAs(f.CAFile))
		}
		if f.CertFile != "" {
			opts = append(opts, nats.ClientCert(f.CertFile, f.KeyFile))
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return opts, nil
}

// newKafkaClient makes the franz-go client of REPLICA_KAFKA_BROKERS with
// the TLS and SASL of c. Like any franz-go client it connects on first
// use.
func newKafkaClient(c Config, log *slog.Logger) (*kgo.Client, error) {
	conn, err := c.kafkaConn()
	if err != nil {
		return nil, err
	}
	if conn.SASLMechanism() == kafkaconn.SASLPlain && !conn.TLS() {
		log.Warn("SASL PLAIN without TLS sends the password in clear text; set REPLICA_KAFKA_TLS=true")
	}
	cl, err := kgo.NewClient(conn.KgoOpts()...)
	if err != nil {
		return nil, fmt.Errorf("REPLICA_KAFKA_BROKERS: %w", err)
	}
	log.Info("kafka client", "conn", conn)
	return cl, nil
}

// kafkaConn checks the REPLICA_KAFKA_* connection variables with the
// bridge's own rules (kafkaconn), each problem naming its REPLICA_KAFKA_
// variable.
func (c Config) kafkaConn() (*kafkaconn.Conn, error) {
	kc := kafkaconn.Config{
		Brokers:       c.KafkaBrokers,
		ClientID:      clientName,
		TLS:           c.KafkaTLS,
		TLSFiles:      c.KafkaTLSFiles,
		TLSServerName: c.KafkaTLSServerName,
		SASLMechanism: c.KafkaSASLMechanism,
		SASLUsername:  c.KafkaSASLUsername,
		SASLPassword:  c.KafkaSASLPassword,
	}
	return kc.ParseAs("REPLICA_KAFKA_")
}
