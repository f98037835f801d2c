package kafka

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/tlstest"
	"github.com/kubebus/bridge/wire"
)

// Acceptance 4: SASL SCRAM, SASL PLAIN and TLS (with client certificates)
// against brokers that require them; wrong credentials or certificates fail
// New with an error that does not show the password.
func TestSecurity(t *testing.T) {
	const user, password = "bridge", "correct-horse-battery"
	pki := tlstest.NewPKI(t)
	other := tlstest.NewPKI(t) // a CA the brokers' certificates do not come from
	tlsVars := map[string]string{"BRIDGE_KAFKA_TLS": "true", "BRIDGE_KAFKA_TLS_CA_FILE": pki.CAFile,
		"BRIDGE_KAFKA_TLS_CERT_FILE": pki.CertFile, "BRIDGE_KAFKA_TLS_KEY_FILE": pki.KeyFile}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	sasl := func(mech, pw string) map[string]string {
		return map[string]string{"BRIDGE_KAFKA_SASL_MECHANISM": mech, "BRIDGE_KAFKA_SASL_USERNAME": user, "BRIDGE_KAFKA_SASL_PASSWORD": pw}
	}
	tests := []struct {
		name    string
		cluster []kafkatest.Option
		vars    map[string]string
		fails   bool
	}{
		{"scram-sha-256", []kafkatest.Option{kafkatest.WithSASL("SCRAM-SHA-256", user, password)}, sasl("scram-sha-256", password), false},
		{"scram-sha-512", []kafkatest.Option{kafkatest.WithSASL("SCRAM-SHA-512", user, password)}, sasl("SCRAM-SHA-512", password), false},
		{"tls with client certificate", []kafkatest.Option{kafkatest.WithTLS(pki.Server, pki.Client)}, tlsVars, false},
		{"plain over tls", []kafkatest.Option{kafkatest.WithTLS(pki.Server, pki.Client), kafkatest.WithSASL("PLAIN", user, password)},
			with(tlsVars, "BRIDGE_KAFKA_SASL_MECHANISM", "plain", "BRIDGE_KAFKA_SASL_USERNAME", user, "BRIDGE_KAFKA_SASL_PASSWORD", password), false},
		{"scram over tls", []kafkatest.Option{kafkatest.WithTLS(pki.Server, pki.Client), kafkatest.WithSASL("SCRAM-SHA-512", user, password)},
			with(tlsVars, "BRIDGE_KAFKA_SASL_MECHANISM", "scram-sha-512", "BRIDGE_KAFKA_SASL_USERNAME", user, "BRIDGE_KAFKA_SASL_PASSWORD", password), false},

		{"wrong password", []kafkatest.Option{kafkatest.WithSASL("SCRAM-SHA-256", user, password)}, sasl("scram-sha-256", "not-the-password"), true},
		{"other scram mechanism", []kafkatest.Option{kafkatest.WithSASL("SCRAM-SHA-256", user, password)}, sasl("scram-sha-512", password), true},
		{"no sasl", []kafkatest.Option{kafkatest.WithSASL("SCRAM-SHA-256", user, password)}, nil, true},
		{"untrusted broker certificate", []kafkatest.Option{kafkatest.WithTLS(pki.Server, pki.Client)},
			with(tlsVars, "BRIDGE_KAFKA_TLS_CA_FILE", other.CAFile), true},
		{"no client certificate", []kafkatest.Option{kafkatest.WithTLS(pki.Server, pki.Client)},
			map[string]string{"BRIDGE_KAFKA_TLS_CA_FILE": pki.CAFile}, true},
		{"plaintext to a tls broker", []kafkatest.Option{kafkatest.WithTLS(pki.Server, pki.Client)}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, tt.cluster...)
			cfg := clusterConfig(t, c, tt.vars)
			s, err := New(t.Context(), cfg, []schema.GroupVersionResource{configmaps}, Options{}, testLogger(t))
			if tt.fails {
				if err == nil {
					s.Close(context.Background())
					t.Fatal("New succeeded, want it to fail")
				}
				t.Logf("New: %v", err)
				for _, secret := range []string{password, "not-the-password"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error shows a password: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			if err := s.Health(); err != nil {
				t.Errorf("Health: %v", err)
			}
			err = s.Publish(t.Context(), []*wire.Message{
				message(configmaps, "ns", "a", "added", 1),
				message(configmaps, "ns", "a", "deleted", 2),
			})
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			recs := c.ReadAll("kube.configmaps")
			if len(recs) != 3 || decode(t, recs[0]).ResourceVersion != "1" || decode(t, recs[1]).ResourceVersion != "2" || recs[2].Value != nil {
				t.Errorf("topic holds %d records, want added, deleted and a tombstone", len(recs))
			}
		})
	}
}
