package main

import (
	"bytes"
	"strings"
	"testing"
)

// An invalid configuration exits 2 and names every variable at fault.
func TestInvalidConfigNamesEveryVariable(t *testing.T) {
	var out bytes.Buffer
	code := run(nil, []string{"REPLICA_BUS=rabbit", "REPLICA_WATCH_QUEUE=0", "REPLICA_MAX_WATCHES=0", "REPLICA_MAX_WATCHES_PER_USER=-1"}, &out)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out.String())
	}
	for _, v := range []string{"REPLICA_BUS", "REPLICA_TLS_CERT_FILE", "REPLICA_TLS_KEY_FILE", "REPLICA_RULES_FILE", "REPLICA_CLIENT_CA_FILE", "REPLICA_WATCH_QUEUE", "REPLICA_MAX_WATCHES", "REPLICA_MAX_WATCHES_PER_USER"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("the report does not name %s:\n%s", v, out.String())
		}
	}
}

// --help lists every variable of the contract.
func TestHelpListsVariables(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, nil, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, v := range []string{"REPLICA_BUS", "REPLICA_NATS_URL", "REPLICA_NATS_STREAM", "REPLICA_NATS_SUBJECT_PREFIX", "REPLICA_NATS_SUBJECT", "REPLICA_KAFKA_BROKERS", "REPLICA_KAFKA_TOPIC_PREFIX",
		"REPLICA_NATS_USER", "REPLICA_NATS_PASSWORD", "REPLICA_NATS_TOKEN", "REPLICA_NATS_NKEY_SEED_FILE", "REPLICA_NATS_CREDS_FILE",
		"REPLICA_NATS_TLS_CA_FILE", "REPLICA_NATS_TLS_CERT_FILE", "REPLICA_NATS_TLS_KEY_FILE",
		"REPLICA_KAFKA_TLS", "REPLICA_KAFKA_TLS_CA_FILE", "REPLICA_KAFKA_TLS_CERT_FILE", "REPLICA_KAFKA_TLS_KEY_FILE", "REPLICA_KAFKA_TLS_SERVER_NAME",
		"REPLICA_KAFKA_SASL_MECHANISM", "REPLICA_KAFKA_SASL_USERNAME", "REPLICA_KAFKA_SASL_PASSWORD",
		"REPLICA_LISTEN", "REPLICA_TLS_CERT_FILE", "REPLICA_TLS_KEY_FILE", "REPLICA_CLIENT_CA_FILE", "REPLICA_TOKEN_FILE", "REPLICA_RULES_FILE", "REPLICA_METRICS_ADDR", "REPLICA_WATCH_QUEUE", "REPLICA_MAX_WATCHES", "REPLICA_MAX_WATCHES_PER_USER", "REPLICA_LOG_LEVEL"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("--help does not list %s", v)
		}
	}
}

// A bad credential or TLS setting names its variable and never quotes a
// secret.
func TestBadBusCredentialsNameTheirVariable(t *testing.T) {
	for _, tc := range []struct {
		bus  string
		vars map[string]string
		want []string
	}{
		{"nats", map[string]string{"REPLICA_NATS_URL": "nats://n:4222", "REPLICA_NATS_PASSWORD": "hunter2", "REPLICA_NATS_TOKEN": "hunter2",
			"REPLICA_NATS_TLS_CA_FILE": "/nonexistent/ca.pem", "REPLICA_NATS_TLS_KEY_FILE": "k.pem"},
			[]string{"REPLICA_NATS_USER", "REPLICA_NATS_TLS_CA_FILE", "REPLICA_NATS_TLS_CERT_FILE"}},
		{"nats", map[string]string{"REPLICA_NATS_URL": "nats://n:4222", "REPLICA_NATS_USER": "u", "REPLICA_NATS_PASSWORD": "hunter2", "REPLICA_NATS_CREDS_FILE": "/nonexistent/u.creds"},
			[]string{"REPLICA_NATS_CREDS_FILE"}},
		{"kafka", map[string]string{"REPLICA_KAFKA_BROKERS": "k:9092", "REPLICA_KAFKA_SASL_MECHANISM": "gssapi", "REPLICA_KAFKA_SASL_PASSWORD": "hunter2",
			"REPLICA_KAFKA_TLS_CERT_FILE": "c.pem"},
			[]string{"REPLICA_KAFKA_SASL_MECHANISM", "REPLICA_KAFKA_SASL_USERNAME", "REPLICA_KAFKA_TLS_KEY_FILE"}},
	} {
		_, err := busConfig(t, tc.bus, tc.vars)
		if err == nil {
			t.Fatalf("%v: no error", tc.vars)
		}
		for _, v := range tc.want {
			if !strings.Contains(err.Error(), v) {
				t.Errorf("the report does not name %s:\n%v", v, err)
			}
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "BRIDGE_") {
			t.Errorf("the report quotes a secret or a bridge variable:\n%v", err)
		}
	}
}
