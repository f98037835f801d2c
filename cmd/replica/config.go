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
	WatchQueue int        `env:"REPLICA_WATCH_QUEUE" envDefault:"1024" help:"how many changes a watcher may fall behind before its watch is cut"`
	LogLevel   slog.Level `env:"REPLICA_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
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
	case "kafka":
		if len(c.KafkaBrokers) == 0 {
			p.Add("REPLICA_KAFKA_BROKERS", "required with REPLICA_BUS=kafka")
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
	return c, p.Err()
}

// help writes every variable, its default and its meaning.
func help(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		def := f.Tag.Get("envDefault")
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Tag.Get("env"), def, f.Tag.Get("help"))
	}
	return tw.Flush()
}
