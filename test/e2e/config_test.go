package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// secretValue is a password or token no output may show.
const secretValue = "s3cr3t-of-the-config-test"

// Every kind of invalid configuration exits with code 2 and names what is
// at fault, and shows no secret.
func TestInvalidConfigExits2(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		names []string // each must appear in the output
	}{
		{"no resources", nil, []string{"BRIDGE_RESOURCES"}},
		{"empty resources", []string{"BRIDGE_RESOURCES= , "}, []string{"BRIDGE_RESOURCES"}},
		{"bad label selector", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_LABEL_SELECTOR=app in (a"}, []string{"BRIDGE_LABEL_SELECTOR"}},
		{"bad field selector", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_FIELD_SELECTOR=a==b==c"}, []string{"BRIDGE_FIELD_SELECTOR"}},
		{"field selector the server rejects", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_FIELD_SELECTOR=spec.nosuch=x"}, []string{"BRIDGE_FIELD_SELECTOR", "configmaps"}},
		{"bad namespace", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_NAMESPACES=ok,Not_OK"}, []string{"BRIDGE_NAMESPACES", "Not_OK"}},
		{"unknown sink", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_SINK=carrier-pigeon"}, []string{"BRIDGE_SINK", "carrier-pigeon"}},
		{"bad checkpoint", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_CHECKPOINT=tape:0"}, []string{"BRIDGE_CHECKPOINT"}},
		{"bad interval", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_CHECKPOINT_INTERVAL=often"}, []string{"BRIDGE_CHECKPOINT_INTERVAL"}},
		{"zero interval", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_CHECKPOINT_INTERVAL=0s"}, []string{"BRIDGE_CHECKPOINT_INTERVAL"}},
		{"bad log level", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_LOG_LEVEL=loud"}, []string{"BRIDGE_LOG_LEVEL"}},
		{"bad log format", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_LOG_FORMAT=xml"}, []string{"BRIDGE_LOG_FORMAT"}},
		{"bad cluster name", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_CLUSTER_NAME=a/b"}, []string{"BRIDGE_CLUSTER_NAME"}},
		{"bad workers", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_WORKERS=-1"}, []string{"BRIDGE_WORKERS"}},
		{"all at once", []string{"BRIDGE_SINK=x", "BRIDGE_LOG_FORMAT=x", "BRIDGE_BATCH_SIZE=many"}, []string{"BRIDGE_RESOURCES", "BRIDGE_SINK", "BRIDGE_LOG_FORMAT", "BRIDGE_BATCH_SIZE"}},
		{"unknown resource", []string{"BRIDGE_RESOURCES=configmaps,nosuchthings"}, []string{"BRIDGE_RESOURCES", "nosuchthings"}},
		{"old object with a view", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_OLD_OBJECT=true", "BRIDGE_DROP_FIELDS=status"}, []string{"BRIDGE_OLD_OBJECT", "BRIDGE_DROP_FIELDS"}},
		{"kafka TLS and SASL", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_SINK=kafka", "BRIDGE_KAFKA_BROKERS=kafka:9092", "BRIDGE_KAFKA_TLS_CA_FILE=/nonexistent/ca.pem",
			"BRIDGE_KAFKA_SASL_MECHANISM=gssapi", "BRIDGE_KAFKA_SASL_USERNAME=u", "BRIDGE_KAFKA_SASL_PASSWORD=" + secretValue}, []string{"BRIDGE_KAFKA_TLS_CA_FILE", "BRIDGE_KAFKA_SASL_MECHANISM"}},
		{"nats TLS and credentials", []string{"BRIDGE_RESOURCES=cm", "BRIDGE_SINK=nats", "BRIDGE_NATS_TLS_KEY_FILE=/nonexistent/key.pem",
			"BRIDGE_NATS_PASSWORD=" + secretValue, "BRIDGE_NATS_TOKEN=" + secretValue}, []string{"BRIDGE_NATS_TLS_CERT_FILE", "BRIDGE_NATS_USER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bridgeBin)
			cmd.Env = append([]string{"KUBECONFIG=" + cp.KubeconfigPath(), "BRIDGE_CHECKPOINT=none", "BRIDGE_METRICS_ADDR=127.0.0.1:0"}, tc.env...)
			cmd.Dir = t.TempDir()
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("exit code %d (%v), want 2; output:\n%s", code, err, out.String())
			}
			for _, name := range tc.names {
				if !strings.Contains(out.String(), name) {
					t.Errorf("output does not name %s:\n%s", name, out.String())
				}
			}
			if strings.Contains(out.String(), secretValue) {
				t.Errorf("output shows a secret:\n%s", out.String())
			}
			if strings.Contains(out.String(), "panic") {
				t.Errorf("output mentions a panic:\n%s", out.String())
			}
		})
	}

	t.Run("help lists every variable", func(t *testing.T) {
		out, err := exec.Command(bridgeBin, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, name := range []string{"BRIDGE_RESOURCES", "BRIDGE_NAMESPACES", "BRIDGE_LABEL_SELECTOR", "BRIDGE_FIELD_SELECTOR",
			"BRIDGE_CLUSTER_NAME", "BRIDGE_SINK", "BRIDGE_CHECKPOINT", "BRIDGE_CHECKPOINT_INTERVAL", "BRIDGE_LOG_LEVEL",
			"BRIDGE_LOG_FORMAT", "BRIDGE_FILTER", "BRIDGE_FIELDS", "BRIDGE_DROP_FIELDS", "KUBECONFIG"} {
			if !strings.Contains(string(out), name) {
				t.Errorf("--help does not list %s", name)
			}
		}
	})
}
