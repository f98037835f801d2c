package kafkaconn

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/test/tlstest"
)

// Parse reads the TLS files and makes the SASL mechanism once: the
// transport and the dialer made later share them, and need the files no
// more.
func TestParseReadsFilesOnce(t *testing.T) {
	pki := tlstest.NewPKI(t)
	c := Config{
		Brokers:       []string{" kafka-0:9092", "", "kafka-1:9092 "},
		ClientID:      "bridge",
		TLSFiles:      envvar.TLSFiles{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile},
		SASLMechanism: "SCRAM-SHA-512", SASLUsername: "u", SASLPassword: "pw-of-the-conn",
	}
	conn, err := c.Parse()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pki.CAFile, pki.CertFile, pki.KeyFile} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	tr, d := conn.Transport(t.Context(), nil), conn.Dialer()
	if tr.TLS == nil || tr.TLS != d.TLS || len(tr.TLS.Certificates) != 1 || tr.TLS.RootCAs == nil {
		t.Errorf("transport TLS %p, dialer TLS %p: want one configuration with the files' certificates", tr.TLS, d.TLS)
	}
	if tr.SASL == nil || tr.SASL != d.SASLMechanism || tr.SASL.Name() != "SCRAM-SHA-512" {
		t.Errorf("transport SASL %v, dialer SASL %v: want one SCRAM-SHA-512 mechanism", tr.SASL, d.SASLMechanism)
	}
	if tr.ClientID != "bridge" || d.ClientID != "bridge" {
		t.Errorf("client ids %q, %q", tr.ClientID, d.ClientID)
	}
	if got := strings.Join(conn.Brokers(), ","); got != "kafka-0:9092,kafka-1:9092" {
		t.Errorf("brokers %s", got)
	}
	if s := conn.String(); strings.Contains(s, "pw-of-the-conn") || s != "brokers=kafka-0:9092,kafka-1:9092 tls=true sasl=scram-sha-512" {
		t.Errorf("String() = %q", s)
	}
}

// Without TLS or SASL settings the connection is plaintext and
// unauthenticated.
func TestParsePlain(t *testing.T) {
	conn, err := (&Config{Brokers: []string{"kafka:9092"}}).Parse()
	if err != nil {
		t.Fatal(err)
	}
	if tr := conn.Transport(t.Context(), nil); tr.TLS != nil || tr.SASL != nil || conn.TLS() || conn.SASLMechanism() != "" {
		t.Errorf("TLS %v, SASL %v", tr.TLS, tr.SASL)
	}
	if conn, err := (&Config{Brokers: []string{"kafka:9093"}, TLS: true}).Parse(); err != nil || !conn.TLS() {
		t.Errorf("BRIDGE_KAFKA_TLS=true alone: %v, TLS %v", err, conn != nil && conn.TLS())
	}
}

// DefaultConfig holds the defaults of the tags, and parses once brokers
// are named.
func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if c.ClientID != "kubebus-bridge" || c.TLS || len(c.Brokers) != 0 {
		t.Fatalf("defaults %+v", c)
	}
	if _, err := c.Parse(); err == nil {
		t.Fatal("parsed without brokers")
	}
	c.Brokers = []string{"kafka-0:9092"}
	conn, err := c.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.String(); got != "brokers=kafka-0:9092 tls=false sasl=none" {
		t.Errorf("connection %s", got)
	}
}

// The clients a Conn makes never print the SASL password, whatever the
// verb: their mechanism shows its name alone.
func TestClientsNeverPrintThePassword(t *testing.T) {
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		cfg := DefaultConfig()
		cfg.Brokers = []string{"k:9092"}
		cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = mech, "bridge", envvar.Secret("hunter2-secret")
		conn, err := cfg.Parse()
		if err != nil {
			t.Fatal(err)
		}
		tr := conn.Transport(t.Context(), nil)
		for _, v := range []any{conn, *conn, conn.Dialer(), *conn.Dialer(), tr, conn.KgoOpts()} {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
				if out := fmt.Sprintf(verb, v); strings.Contains(out, "hunter2") {
					t.Errorf("%s: %s of %T prints the password: %s", mech, verb, v, out)
				}
			}
		}
		// A Transport holds a lock, so it is printed through its field.
		for _, verb := range []string{"%v", "%+v", "%#v"} {
			if out := fmt.Sprintf(verb, tr.SASL); strings.Contains(out, "hunter2") {
				t.Errorf("%s: %s of the Transport's mechanism prints the password: %s", mech, verb, out)
			}
		}
		if got := conn.Dialer().SASLMechanism.Name(); !strings.EqualFold(got, mech) {
			t.Errorf("mechanism %q, want %s", got, mech)
		}
	}
}

// ParseAs names the variables with the caller's prefix, in the variable
// at fault and in the message.
func TestParseAsNamesTheCallersVariables(t *testing.T) {
	cfg := Config{Brokers: []string{"nohost"}, SASLMechanism: "gssapi", TLSFiles: envvar.TLSFiles{CertFile: "c.pem"}}
	_, err := cfg.ParseAs("REPLICA_KAFKA_")
	var names []string
	for _, e := range envvar.Split(err) {
		var v *envvar.Error
		if !errors.As(e, &v) {
			t.Fatalf("%v is not an *envvar.Error", e)
		}
		names = append(names, v.Var)
	}
	want := []string{"REPLICA_KAFKA_BROKERS", "REPLICA_KAFKA_TLS_KEY_FILE", "REPLICA_KAFKA_SASL_MECHANISM", "REPLICA_KAFKA_SASL_USERNAME", "REPLICA_KAFKA_SASL_PASSWORD"}
	if !slices.Equal(names, want) || strings.Contains(err.Error(), "BRIDGE_") {
		t.Errorf("ParseAs named %v, want %v:\n%v", names, want, err)
	}
}
