package main

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/tlstest"
)

// busConfig is the replica's configuration for bus, with the variables
// of vars: the API's own files exist, so that only the bus's part is
// checked.
func busConfig(t *testing.T, bus string, vars map[string]string) (Config, error) {
	t.Helper()
	dir := t.TempDir()
	environ := []string{"REPLICA_BUS=" + bus}
	for _, name := range []string{"REPLICA_TLS_CERT_FILE", "REPLICA_TLS_KEY_FILE", "REPLICA_RULES_FILE", "REPLICA_TOKEN_FILE"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		environ = append(environ, name+"="+path)
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		environ = append(environ, k+"="+vars[k])
	}
	return parseConfig(environ)
}

// replicaVars renames a natstest server's BRIDGE_NATS_* variables to the
// replica's, whose meanings are the same.
func replicaVars(bridge map[string]string, keep func(string) bool) map[string]string {
	out := map[string]string{}
	for k, v := range bridge {
		if keep(k) {
			out["REPLICA_"+k[len("BRIDGE_"):]] = v
		}
	}
	return out
}

// The replica's NATS client connects to a server that requires
// credentials and TLS with the REPLICA_NATS_* variables, and is refused
// without them.
func TestNATSCredentialsAndTLS(t *testing.T) {
	for name, o := range map[string]natstest.Options{
		"user and password, TLS": {User: "replica", Password: "s3cret", TLS: true},
		"token":                  {Token: "t0ken"},
		"nkey seed, TLS":         {NKey: true, TLS: true},
	} {
		t.Run(name, func(t *testing.T) {
			srv := natstest.Start(t, o)
			all := func(string) bool { return true }
			urlOnly := func(k string) bool { return k == "BRIDGE_NATS_URL" }

			cfg, err := busConfig(t, "nats", replicaVars(srv.Env(), all))
			if err != nil {
				t.Fatal(err)
			}
			nc, err := connectNATS(cfg)
			if err != nil {
				t.Fatalf("with the credentials: %v", err)
			}
			nc.Close()

			cfg, err = busConfig(t, "nats", replicaVars(srv.Env(), urlOnly))
			if err != nil {
				t.Fatal(err)
			}
			if nc, err := connectNATS(cfg); err == nil {
				nc.Close()
				t.Fatal("connected without the credentials")
			}
		})
	}
}

// The replica's Kafka client reaches brokers that require TLS with a
// client certificate and SASL with the REPLICA_KAFKA_* variables, and is
// refused without them.
func TestKafkaTLSAndSASL(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			pki := tlstest.NewPKI(t)
			cluster := kafkatest.Start(t, kafkatest.WithTLS(pki.Server, pki.Client), kafkatest.WithSASL(mech, "replica", "s3cret"))
			brokers := cluster.Addrs()[0]
			tlsVars := map[string]string{
				"REPLICA_KAFKA_BROKERS":       brokers,
				"REPLICA_KAFKA_TLS_CA_FILE":   pki.CAFile,
				"REPLICA_KAFKA_TLS_CERT_FILE": pki.CertFile,
				"REPLICA_KAFKA_TLS_KEY_FILE":  pki.KeyFile,
			}
			saslVars := map[string]string{
				"REPLICA_KAFKA_SASL_MECHANISM": mech,
				"REPLICA_KAFKA_SASL_USERNAME":  "replica",
				"REPLICA_KAFKA_SASL_PASSWORD":  "s3cret",
			}
			for _, tc := range []struct {
				name    string
				vars    map[string]string
				reaches bool
			}{
				{"TLS and SASL", merge(tlsVars, saslVars), true},
				{"no SASL", tlsVars, false},
				{"no TLS", merge(map[string]string{"REPLICA_KAFKA_BROKERS": brokers}, saslVars), false},
				{"wrong password", merge(tlsVars, saslVars, map[string]string{"REPLICA_KAFKA_SASL_PASSWORD": "guess"}), false},
			} {
				cfg, err := busConfig(t, "kafka", tc.vars)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				cl, err := newKafkaClient(cfg, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				err = cl.Ping(ctx)
				cancel()
				cl.Close()
				if reached := err == nil; reached != tc.reaches {
					t.Errorf("%s: ping: %v, want reached=%t", tc.name, err, tc.reaches)
				}
			}
		})
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}
