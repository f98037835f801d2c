package kafka

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/test/tlstest"
)

func TestDefaultsAreValid(t *testing.T) {
	c := loadConfig(t, map[string]string{"BRIDGE_KAFKA_BROKERS": "kafka:9092"})
	set, err := c.Parse()
	if err != nil {
		t.Fatalf("defaults with a broker: %v", err)
	}
	want := Config{
		Config:      kafkaconn.Config{Brokers: []string{"kafka:9092"}, ClientID: "kubebus-bridge"},
		TopicPrefix: "kube", CreateTopics: true,
		Partitions: -1, ReplicationFactor: -1, Layout: LayoutState, DeleteRetention: 24 * time.Hour,
		CEMode: ModeStructured, Tombstones: true, RequiredAcks: AcksAll,
		BatchSize: 500, BatchTimeout: 10 * time.Millisecond, Compression: "none", MaxMessageBytes: 1048576,
	}
	if fmt.Sprintf("%#v", c) != fmt.Sprintf("%#v", want) {
		t.Errorf("defaults:\n got %#v\nwant %#v", c, want)
	}
	if set.Conn().TLS() {
		t.Error("TLS is on by default")
	}
	if m := set.Conn().SASLMechanism(); m != "" {
		t.Errorf("SASL is on by default: %s", m)
	}
	if set.acks != kafkago.RequireAll || set.codec != 0 {
		t.Errorf("parsed acks %v, codec %v; want all and none", set.acks, set.codec)
	}
}

// Parse reports every problem, each an *envvar.Error that names its
// variable.
func TestParseNamesTheVariables(t *testing.T) {
	pki := tlstest.NewPKI(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		vars map[string]string
		want []string // each error must start with one of these, in order, and name its variable
	}{
		{"valid everything", map[string]string{
			"BRIDGE_KAFKA_TOPIC": "all-changes", "BRIDGE_KAFKA_PARTITIONS": "6", "BRIDGE_KAFKA_REPLICATION_FACTOR": "3",
			"BRIDGE_KAFKA_LAYOUT": "history", "BRIDGE_KAFKA_TOMBSTONES": "false", "BRIDGE_KAFKA_DELETE_RETENTION": "0s",
			"BRIDGE_KAFKA_TOPIC_CONFIGS": "cleanup.policy=compact,delete,retention.ms=1", "BRIDGE_KAFKA_CE_MODE": "binary",
			"BRIDGE_KAFKA_REQUIRED_ACKS": "one", "BRIDGE_KAFKA_COMPRESSION": "zstd", "BRIDGE_KAFKA_TLS_CA_FILE": pki.CAFile,
			"BRIDGE_KAFKA_TLS_CERT_FILE": pki.CertFile, "BRIDGE_KAFKA_TLS_KEY_FILE": pki.KeyFile,
			"BRIDGE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "BRIDGE_KAFKA_SASL_USERNAME": "u", "BRIDGE_KAFKA_SASL_PASSWORD": "s3cr3t-pw",
		}, nil},
		{"no brokers", map[string]string{"BRIDGE_KAFKA_BROKERS": " , "}, []string{"BRIDGE_KAFKA_BROKERS: required"}},
		{"bad brokers", map[string]string{"BRIDGE_KAFKA_BROKERS": "kafka,:9092,kafka:http,kafka:0"},
			[]string{"BRIDGE_KAFKA_BROKERS: \"kafka\"", "BRIDGE_KAFKA_BROKERS: \":9092\"", "BRIDGE_KAFKA_BROKERS: \"kafka:http\"", "BRIDGE_KAFKA_BROKERS: \"kafka:0\""}},
		{"bad prefix", map[string]string{"BRIDGE_KAFKA_TOPIC_PREFIX": "kube/x"}, []string{"BRIDGE_KAFKA_TOPIC_PREFIX: "}},
		{"bad topic", map[string]string{"BRIDGE_KAFKA_TOPIC": ".."}, []string{"BRIDGE_KAFKA_TOPIC: "}},
		{"partitions", map[string]string{"BRIDGE_KAFKA_PARTITIONS": "0"}, []string{"BRIDGE_KAFKA_PARTITIONS: "}},
		{"replication", map[string]string{"BRIDGE_KAFKA_REPLICATION_FACTOR": "-2"}, []string{"BRIDGE_KAFKA_REPLICATION_FACTOR: "}},
		{"topic configs", map[string]string{"BRIDGE_KAFKA_TOPIC_CONFIGS": "compact"}, []string{"BRIDGE_KAFKA_TOPIC_CONFIGS: "}},
		{"layout", map[string]string{"BRIDGE_KAFKA_LAYOUT": "latest"}, []string{"BRIDGE_KAFKA_LAYOUT: \"latest\" is not a layout"}},
		{"state layout agrees", map[string]string{"BRIDGE_KAFKA_DELETE_RETENTION": "1s",
			"BRIDGE_KAFKA_TOPIC_CONFIGS": "cleanup.policy=compact,delete,retention.ms=-1,retention.bytes=-1,min.compaction.lag.ms=60000"}, nil},
		{"delete retention", map[string]string{"BRIDGE_KAFKA_DELETE_RETENTION": "999ms"}, []string{"BRIDGE_KAFKA_DELETE_RETENTION: "}},
		{"delete retention in parts of a millisecond", map[string]string{"BRIDGE_KAFKA_DELETE_RETENTION": "1.5ms"}, []string{"BRIDGE_KAFKA_DELETE_RETENTION: "}},
		{"state without tombstones", map[string]string{"BRIDGE_KAFKA_TOMBSTONES": "false"},
			[]string{"BRIDGE_KAFKA_TOMBSTONES: false contradicts BRIDGE_KAFKA_LAYOUT=state"}},
		{"state with another cleanup policy", map[string]string{"BRIDGE_KAFKA_TOPIC_CONFIGS": "cleanup.policy=delete"},
			[]string{"BRIDGE_KAFKA_TOPIC_CONFIGS: cleanup.policy=delete contradicts BRIDGE_KAFKA_LAYOUT=state"}},
		{"state with retention", map[string]string{"BRIDGE_KAFKA_TOPIC_CONFIGS": "cleanup.policy=compact,delete,retention.ms=604800000,retention.bytes=1000000"},
			[]string{"BRIDGE_KAFKA_TOPIC_CONFIGS: retention.ms=604800000 contradicts BRIDGE_KAFKA_LAYOUT=state", "BRIDGE_KAFKA_TOPIC_CONFIGS: retention.bytes=1000000 contradicts BRIDGE_KAFKA_LAYOUT=state"}},
		{"state with delete.retention.ms", map[string]string{"BRIDGE_KAFKA_TOPIC_CONFIGS": "delete.retention.ms=1000"},
			[]string{"BRIDGE_KAFKA_TOPIC_CONFIGS: delete.retention.ms=1000 contradicts BRIDGE_KAFKA_LAYOUT=state: set how long tombstones stay with BRIDGE_KAFKA_DELETE_RETENTION"}},
		{"mode", map[string]string{"BRIDGE_KAFKA_CE_MODE": "json"}, []string{"BRIDGE_KAFKA_CE_MODE: "}},
		{"acks", map[string]string{"BRIDGE_KAFKA_REQUIRED_ACKS": "-1"}, []string{"BRIDGE_KAFKA_REQUIRED_ACKS: "}},
		{"batch", map[string]string{"BRIDGE_KAFKA_BATCH_SIZE": "0", "BRIDGE_KAFKA_BATCH_TIMEOUT": "0s"},
			[]string{"BRIDGE_KAFKA_BATCH_SIZE: ", "BRIDGE_KAFKA_BATCH_TIMEOUT: "}},
		{"compression", map[string]string{"BRIDGE_KAFKA_COMPRESSION": "brotli"}, []string{"BRIDGE_KAFKA_COMPRESSION: "}},
		{"max message bytes", map[string]string{"BRIDGE_KAFKA_MAX_MESSAGE_BYTES": "10"}, []string{"BRIDGE_KAFKA_MAX_MESSAGE_BYTES: "}},
		{"ca missing", map[string]string{"BRIDGE_KAFKA_TLS_CA_FILE": "/nonexistent/ca.pem"}, []string{"BRIDGE_KAFKA_TLS_CA_FILE: "}},
		{"ca not pem", map[string]string{"BRIDGE_KAFKA_TLS_CA_FILE": notPEM}, []string{"BRIDGE_KAFKA_TLS_CA_FILE: "}},
		{"cert without key", map[string]string{"BRIDGE_KAFKA_TLS_CERT_FILE": pki.CertFile}, []string{"BRIDGE_KAFKA_TLS_KEY_FILE: "}},
		{"key without cert", map[string]string{"BRIDGE_KAFKA_TLS_KEY_FILE": pki.KeyFile}, []string{"BRIDGE_KAFKA_TLS_CERT_FILE: "}},
		{"bad key pair", map[string]string{"BRIDGE_KAFKA_TLS_CERT_FILE": pki.CAFile, "BRIDGE_KAFKA_TLS_KEY_FILE": pki.KeyFile},
			[]string{"BRIDGE_KAFKA_TLS_CERT_FILE: "}},
		{"mechanism", map[string]string{"BRIDGE_KAFKA_SASL_MECHANISM": "gssapi", "BRIDGE_KAFKA_SASL_USERNAME": "u", "BRIDGE_KAFKA_SASL_PASSWORD": "s3cr3t-pw"},
			[]string{"BRIDGE_KAFKA_SASL_MECHANISM: "}},
		{"credentials missing", map[string]string{"BRIDGE_KAFKA_SASL_MECHANISM": "plain"},
			[]string{"BRIDGE_KAFKA_SASL_USERNAME: ", "BRIDGE_KAFKA_SASL_PASSWORD: "}},
		{"credentials without mechanism", map[string]string{"BRIDGE_KAFKA_SASL_USERNAME": "u"}, []string{"BRIDGE_KAFKA_SASL_MECHANISM: "}},
		{"scram rejects the password", map[string]string{"BRIDGE_KAFKA_SASL_MECHANISM": "scram-sha-256", "BRIDGE_KAFKA_SASL_USERNAME": "u",
			"BRIDGE_KAFKA_SASL_PASSWORD": "bad\u0007secret"}, []string{"BRIDGE_KAFKA_SASL_USERNAME: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{"BRIDGE_KAFKA_BROKERS": "kafka-0:9092,kafka-1:9092"}
			for k, v := range tt.vars {
				vars[k] = v
			}
			c := loadConfig(t, vars)
			set, err := c.Parse()
			if (set == nil) == (err == nil) {
				t.Fatalf("Parse = %v, %v: want settings or an error", set, err)
			}
			got := envvar.Split(err)
			if len(got) != len(tt.want) {
				t.Fatalf("Parse: %d errors, want %d:\n%v", len(got), len(tt.want), err)
			}
			for i, w := range tt.want {
				var ve *envvar.Error
				name, _, _ := strings.Cut(w, ":")
				if !errors.As(got[i], &ve) || ve.Var != name {
					t.Errorf("error %d: %v, want an *envvar.Error naming %s", i, got[i], name)
				}
				if !strings.HasPrefix(got[i].Error(), w) {
					t.Errorf("error %d: %q, want it to start with %q", i, got[i], w)
				}
			}
			if pw := vars["BRIDGE_KAFKA_SASL_PASSWORD"]; pw != "" && err != nil && strings.Contains(err.Error(), pw) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

// The password shows nowhere: not in fmt's verbs, slog or JSON, whether
// the Config, its Parsed or the connection is shown.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "hunter2-very-secret"
	c := loadConfig(t, map[string]string{
		"BRIDGE_KAFKA_BROKERS": "kafka:9092", "BRIDGE_KAFKA_SASL_MECHANISM": "plain",
		"BRIDGE_KAFKA_SASL_USERNAME": "bridge", "BRIDGE_KAFKA_SASL_PASSWORD": pw,
	})
	if string(c.SASLPassword) != pw {
		t.Fatalf("password not read: %q", c.SASLPassword)
	}
	set, err := c.Parse()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"config": c, "settings": set, "conn": set.Conn()} {
		var logged strings.Builder
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "config", v, "password", c.SASLPassword)
		slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "config", v, "password", c.SASLPassword)
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for verb, out := range map[string]string{
			"%v": fmt.Sprintf("%v", v), "%+v": fmt.Sprintf("%+v", v), "%#v": fmt.Sprintf("%#v", v), "Sprint": fmt.Sprint(c.SASLPassword),
			"slog": logged.String(), "json": string(js),
		} {
			if strings.Contains(out, pw) {
				t.Errorf("%s %s shows the password: %s", name, verb, out)
			}
			if name == "config" && !strings.Contains(out, envvar.Redacted) {
				t.Errorf("%s %s does not say the password is redacted: %s", name, verb, out)
			}
		}
	}
}

func TestParseTopicConfigs(t *testing.T) {
	tests := []struct {
		in, want string // want: name=value;... or "error"
	}{
		{"", ""},
		{"cleanup.policy=compact", "cleanup.policy=compact"},
		{"cleanup.policy=compact,delete,retention.ms=60000", "cleanup.policy=compact,delete;retention.ms=60000"},
		{" max.message.bytes =4194304, min.insync.replicas=2", "max.message.bytes=4194304;min.insync.replicas=2"},
		{"a=", "a="},
		{"compact", "error"},
		{"=1", "error"},
		{"a=1,a=2", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			entries, err := ParseTopicConfigs(tt.in)
			var parts []string
			for _, e := range entries {
				parts = append(parts, e.ConfigName+"="+e.ConfigValue)
			}
			got := strings.Join(parts, ";")
			if err != nil {
				got = "error"
			}
			if got != tt.want {
				t.Errorf("ParseTopicConfigs(%q) = %q (%v), want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// Topics the bridge creates get the state layout's configs, with
// BRIDGE_KAFKA_TOPIC_CONFIGS on top; in the history layout only those.
func TestCreateConfigs(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"state", nil, "cleanup.policy=compact,retention.ms=-1,delete.retention.ms=86400000"},
		{"state with a delete retention", map[string]string{"BRIDGE_KAFKA_DELETE_RETENTION": "90s"},
			"cleanup.policy=compact,retention.ms=-1,delete.retention.ms=90000"},
		{"state with topic configs", map[string]string{"BRIDGE_KAFKA_TOPIC_CONFIGS": "max.message.bytes=4194304,cleanup.policy=compact,delete"},
			"cleanup.policy=compact,delete,retention.ms=-1,delete.retention.ms=86400000,max.message.bytes=4194304"},
		{"history", map[string]string{"BRIDGE_KAFKA_LAYOUT": "history"}, ""},
		{"history with topic configs", map[string]string{"BRIDGE_KAFKA_LAYOUT": "history", "BRIDGE_KAFKA_TOPIC_CONFIGS": "retention.ms=60000"},
			"retention.ms=60000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{"BRIDGE_KAFKA_BROKERS": "kafka:9092"}
			maps.Copy(vars, tt.vars)
			if got := configString(settings(t, vars).createConfig); got != tt.want {
				t.Errorf("configs of created topics = %q, want %q", got, tt.want)
			}
		})
	}
}
