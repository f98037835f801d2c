package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/caarlos0/env/v11"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/wire"
)

// Config is the replica's configuration, read once from the environment.
type Config struct {
	Bus string `env:"REPLICA_BUS" help:"required; the bus the bridges publish to in the state layout: nats or kafka"`

	NATSURL           string `env:"REPLICA_NATS_URL" help:"NATS server URL(s), comma-separated; required with REPLICA_BUS=nats"`
	NATSStream        string `env:"REPLICA_NATS_STREAM" envDefault:"KUBE" help:"the bridges' JetStream stream (their BRIDGE_NATS_STREAM)"`
	NATSSubjectPrefix string `env:"REPLICA_NATS_SUBJECT_PREFIX" envDefault:"kube" help:"the bridges' BRIDGE_NATS_SUBJECT_PREFIX"`
	// The state layout's default subject, as the bridges write it.
	NATSSubject string `env:"REPLICA_NATS_SUBJECT" help:"the bridges' BRIDGE_NATS_SUBJECT; empty means the state layout's default"`

	KafkaBrokers     []string `env:"REPLICA_KAFKA_BROKERS" help:"comma-separated Kafka brokers (host:port); required with REPLICA_BUS=kafka"`
	KafkaTopicPrefix string   `env:"REPLICA_KAFKA_TOPIC_PREFIX" envDefault:"kube" help:"the bridges' BRIDGE_KAFKA_TOPIC_PREFIX"`

	// The bus's credentials and TLS, meaning what the bridges'
	// BRIDGE_NATS_* and BRIDGE_KAFKA_* variables of the same names mean
	// (bus.go). None is set by default: a plain, open bus.
	NATSUser           string          `env:"REPLICA_NATS_USER" help:"user name, with REPLICA_NATS_PASSWORD"`
	NATSPassword       envvar.Secret   `env:"REPLICA_NATS_PASSWORD" help:"password, with REPLICA_NATS_USER (never logged)"`
	NATSToken          envvar.Secret   `env:"REPLICA_NATS_TOKEN" help:"authentication token (never logged)"`
	NATSNKeySeedFile   string          `env:"REPLICA_NATS_NKEY_SEED_FILE" help:"file holding an NKey seed to authenticate with"`
	NATSCredsFile      string          `env:"REPLICA_NATS_CREDS_FILE" help:"credentials file (user JWT and NKey seed) to authenticate with"`
	NATSTLSFiles       envvar.TLSFiles `envPrefix:"REPLICA_NATS_"`
	KafkaTLS           bool            `env:"REPLICA_KAFKA_TLS" envDefault:"false" help:"connect with TLS; on as well when any other REPLICA_KAFKA_TLS_* variable is set"`
	KafkaTLSFiles      envvar.TLSFiles `envPrefix:"REPLICA_KAFKA_"`
	KafkaTLSServerName string          `env:"REPLICA_KAFKA_TLS_SERVER_NAME" help:"name the brokers' certificates must carry; the broker's host when unset"`
	KafkaSASLMechanism string          `env:"REPLICA_KAFKA_SASL_MECHANISM" help:"SASL authentication: plain, scram-sha-256 or scram-sha-512; none when unset"`
	KafkaSASLUsername  string          `env:"REPLICA_KAFKA_SASL_USERNAME" help:"SASL user"`
	KafkaSASLPassword  envvar.Secret   `env:"REPLICA_KAFKA_SASL_PASSWORD" help:"SASL password (never logged)"`

	// 6443, the API server's own port, so that kubeconfigs look familiar.
	Listen       string `env:"REPLICA_LISTEN" envDefault:":6443" help:"address the API is served on, always over TLS"`
	TLSCertFile  string `env:"REPLICA_TLS_CERT_FILE" help:"required; PEM certificate the API is served with"`
	TLSKeyFile   string `env:"REPLICA_TLS_KEY_FILE" help:"required; PEM private key of REPLICA_TLS_CERT_FILE"`
	ClientCAFile string `env:"REPLICA_CLIENT_CA_FILE" help:"PEM CAs whose client certificates authenticate users (CN the user, O the groups); this or REPLICA_TOKEN_FILE is required"`
	TokenFile    string `env:"REPLICA_TOKEN_FILE" help:"bearer tokens, in kube-apiserver's --token-auth-file CSV form (token,user,uid,\"group1,group2\"); this or REPLICA_CLIENT_CA_FILE is required"`
	RulesFile    string `env:"REPLICA_RULES_FILE" help:"required; YAML access rules: which users and groups may read which clusters"`

	// Apart from the API, so that probes and scrapes need no credentials;
	// it serves no object.
	MetricsAddr string `env:"REPLICA_METRICS_ADDR" envDefault:":9090" help:"plain HTTP address of /metrics, /healthz and /readyz (no data is served there)"`
	// 1024 changes: a burst is absorbed, a reader that stopped is cut.
	WatchQueue int `env:"REPLICA_WATCH_QUEUE" envDefault:"1024" help:"how many changes a watcher may fall behind before its watch is cut"`
	// 10000: each watch holds a connection, a goroutine and up to
	// REPLICA_WATCH_QUEUE changes; that many stay within a pod's memory
	// and file limits.
	MaxWatches int `env:"REPLICA_MAX_WATCHES" envDefault:"10000" help:"watches served at once, every user's together; one more is refused, 429"`
	// 1000: a client that leaks watches cannot take them all, and an
	// informer holds only one per resource.
	MaxWatchesPerUser int        `env:"REPLICA_MAX_WATCHES_PER_USER" envDefault:"1000" help:"watches served at once to one authenticated user name; one more is refused, 429"`
	LogLevel          slog.Level `env:"REPLICA_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
}

// parseConfig reads environ and reports every problem at once, each naming
// its variable.
func parseConfig(environ []string) (Config, error) {
	var c Config
	m := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	var p envvar.Problems
	if err := env.ParseWithOptions(&c, env.Options{Environment: m}); err != nil {
		p.Join(err)
		return c, p.Err()
	}
	if c.NATSSubject == "" {
		c.NATSSubject = wire.DefaultStateSubject
	}
	switch c.Bus {
	case "nats":
		if c.NATSURL == "" {
			p.Add("REPLICA_NATS_URL", "required with REPLICA_BUS=nats")
		}
		_, err := c.natsAuth()
		p.Join(err)
	case "kafka":
		if len(c.KafkaBrokers) == 0 {
			p.Add("REPLICA_KAFKA_BROKERS", "required with REPLICA_BUS=kafka")
		} else {
			_, err := c.kafkaConn()
			p.Join(err)
		}
	case "":
		p.Add("REPLICA_BUS", "required: nats or kafka")
	default:
		p.Add("REPLICA_BUS", "%q is not a bus: nats or kafka", c.Bus)
	}
	for name, v := range map[string]string{"REPLICA_TLS_CERT_FILE": c.TLSCertFile, "REPLICA_TLS_KEY_FILE": c.TLSKeyFile, "REPLICA_RULES_FILE": c.RulesFile} {
		if v == "" {
			p.Add(name, "required")
		} else if _, err := os.Stat(v); err != nil {
			p.Add(name, "%v", err)
		}
	}
	if c.ClientCAFile == "" && c.TokenFile == "" {
		p.Add("REPLICA_CLIENT_CA_FILE", "this or REPLICA_TOKEN_FILE is required: nothing is served unauthenticated")
	}
	for name, v := range map[string]string{"REPLICA_CLIENT_CA_FILE": c.ClientCAFile, "REPLICA_TOKEN_FILE": c.TokenFile} {
		if v != "" {
			if _, err := os.Stat(v); err != nil {
				p.Add(name, "%v", err)
			}
		}
	}
	if c.WatchQueue < 1 {
		p.Add("REPLICA_WATCH_QUEUE", "%d is not a queue length: at least 1", c.WatchQueue)
	}
	if c.MaxWatches < 1 {
		p.Add("REPLICA_MAX_WATCHES", "%d watches: at least 1", c.MaxWatches)
	}
	if c.MaxWatchesPerUser < 1 {
		p.Add("REPLICA_MAX_WATCHES_PER_USER", "%d watches: at least 1", c.MaxWatchesPerUser)
	}
	return c, p.Err()
}

// help writes every variable, its default and its meaning.
func help(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	helpRows(tw, reflect.TypeFor[Config](), "")
	return tw.Flush()
}

// helpRows writes the variables of t, descending into the structs it
// holds (envvar.TLSFiles) with the prefix of their envPrefix tags.
func helpRows(w io.Writer, t reflect.Type, prefix string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if p, ok := f.Tag.Lookup("envPrefix"); ok && f.Type.Kind() == reflect.Struct {
			helpRows(w, f.Type, prefix+p)
			continue
		}
		def := f.Tag.Get("envDefault")
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", prefix+f.Tag.Get("env"), def, f.Tag.Get("help"))
	}
}
