package kafkastore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/tlstest"
)

// The store connects with the same TLS and SASL settings as the sink: its
// writes and its reads (which use other kafka-go code) both work.
func TestSecuredCluster(t *testing.T) {
	pki := tlstest.NewPKI(t)
	c := kafkatest.Start(t, kafkatest.WithTLS(pki.Server, pki.Client), kafkatest.WithSASL("SCRAM-SHA-512", "bridge", "pw-for-the-store"))
	cfg := config(t, c, map[string]string{
		"BRIDGE_KAFKA_TLS_CA_FILE": pki.CAFile, "BRIDGE_KAFKA_TLS_CERT_FILE": pki.CertFile, "BRIDGE_KAFKA_TLS_KEY_FILE": pki.KeyFile,
		"BRIDGE_KAFKA_SASL_MECHANISM": "scram-sha-512", "BRIDGE_KAFKA_SASL_USERNAME": "bridge", "BRIDGE_KAFKA_SASL_PASSWORD": "pw-for-the-store",
	})
	topic := newTopic()
	commit(t, open(t, cfg, topic), put("configmaps", "ns/a", "u", "3"), del("configmaps", "ns/b", "u", "4"))
	assertSnapshot(t, "after reopening", load(t, open(t, cfg, topic), "configmaps"),
		checkpoint.Snapshot{Objects: map[string]checkpoint.Position{"ns/a": {UID: "u", ResourceVersion: "3"}}, LastResourceVersion: "4"})

	cfg.SASLPassword = "wrong-password"
	if s, err := openStore(t.Context(), t, cfg, topic); err == nil {
		s.Close()
		t.Error("Open with a wrong password succeeded")
	} else if strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("error shows the password: %v", err)
	}
}

// A Commit the cluster does not acknowledge fails and changes nothing
// Load sees.
func TestCommitFailsWhenClusterIsDown(t *testing.T) {
	c := kafkatest.Start(t)
	s := open(t, config(t, c, nil), newTopic())
	commit(t, s, put("configmaps", "ns/a", "u", "1"))
	c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := s.Commit(ctx, []checkpoint.Record{put("configmaps", "ns/a", "u", "2"), put("configmaps", "ns/b", "u", "3")})
	if err == nil || !strings.HasPrefix(err.Error(), "checkpoint: kafka: commit 2 records") {
		t.Fatalf("Commit to a stopped cluster: %v", err)
	}
	assertSnapshot(t, "after the failed commit", load(t, s, "configmaps"),
		checkpoint.Snapshot{Objects: map[string]checkpoint.Position{"ns/a": {UID: "u", ResourceVersion: "1"}}, LastResourceVersion: "1"})
}

// Open says what is wrong with what it is given instead of failing later,
// or panicking.
func TestOpenRefusesBadArguments(t *testing.T) {
	cfg := kafkaconn.DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	conn, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		conn *kafkaconn.Conn
		opts Options
		want string
	}{
		{"no connection", nil, Options{}, "no connection"},
		{"negative size", conn, Options{MaxMessageBytes: -1}, "must not be negative"},
		{"negative timeout", conn, Options{BatchTimeout: -time.Second}, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.conn, "checkpoint", tc.opts, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, %v; want an error saying %q", s, err, tc.want)
			}
		})
	}
}
