package main

import (
	"bytes"
	"strings"
	"testing"
)

// An invalid configuration exits 2 and names every variable at fault.
func TestInvalidConfigNamesEveryVariable(t *testing.T) {
	var out bytes.Buffer
	code := run(nil, []string{"REPLICA_BUS=rabbit", "REPLICA_WATCH_QUEUE=0"}, &out)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out.String())
	}
	for _, v := range []string{"REPLICA_BUS", "REPLICA_TLS_CERT_FILE", "REPLICA_TLS_KEY_FILE", "REPLICA_RULES_FILE", "REPLICA_CLIENT_CA_FILE", "REPLICA_WATCH_QUEUE"} {
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
	for _, v := range []string{"REPLICA_BUS", "REPLICA_NATS_URL", "REPLICA_NATS_STREAM", "REPLICA_NATS_SUBJECT_PREFIX", "REPLICA_NATS_SUBJECT", "REPLICA_KAFKA_BROKERS", "REPLICA_KAFKA_TOPIC_PREFIX", "REPLICA_LISTEN", "REPLICA_TLS_CERT_FILE", "REPLICA_TLS_KEY_FILE", "REPLICA_CLIENT_CA_FILE", "REPLICA_TOKEN_FILE", "REPLICA_RULES_FILE", "REPLICA_METRICS_ADDR", "REPLICA_WATCH_QUEUE", "REPLICA_LOG_LEVEL"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("--help does not list %s", v)
		}
	}
}
