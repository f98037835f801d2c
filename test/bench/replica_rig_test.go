package bench

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubebus/bridge/test/controlplane"
)

// replicaUser is who the benchmark's clients are to the replica: the
// control plane's admin token, given to the replica in its token file, so
// that both servers are asked with the same credentials.
const replicaUser = "bench"

// replicaSide is one of the two servers the replica scenario asks: the
// replica, or the real kube-apiserver.
type replicaSide struct {
	name string
	// rc is a client configuration of the side: the same TLS (certificate,
	// key, CA data) and bearer token on both sides; only the URL differs,
	// the replica's under /clusters/<name>.
	rc *rest.Config
	// kubeconfig is a file holding rc, for the watchers' process.
	kubeconfig string
}

// startReplica runs the replica (bin) on the bus as a child, serving TLS
// with the API server's own certificate and key and trusting the control
// plane's admin token, and returns it once it is ready, with the side that
// asks it. The bridge publishes cluster as BRIDGE_CLUSTER_NAME.
func startReplica(b *testing.B, bin string, cp *controlplane.ControlPlane, natsURL, cluster, dir string) (*child, replicaSide) {
	b.Helper()
	admin := cp.RESTConfig()
	certs := filepath.Join(cp.Dir(), "apiserver-certs")
	tokens := filepath.Join(dir, "replica-tokens.csv")
	writeFile(b, tokens, fmt.Sprintf("%s,%s,1001\n", admin.BearerToken, replicaUser))
	env := []string{
		"REPLICA_BUS=nats",
		"REPLICA_NATS_URL=" + natsURL,
		"REPLICA_NATS_STREAM=" + busStream,
		"REPLICA_LISTEN=127.0.0.1:0",
		"REPLICA_TLS_CERT_FILE=" + filepath.Join(certs, "apiserver.crt"),
		"REPLICA_TLS_KEY_FILE=" + filepath.Join(certs, "apiserver.key"),
		"REPLICA_TOKEN_FILE=" + tokens,
		"REPLICA_METRICS_ADDR=127.0.0.1:0",
	}
	rules := filepath.Join(dir, "replica-rules.yaml")
	writeFile(b, rules, replicaRules(cluster))
	c := startChild(b, "replica", bin, append(env, "REPLICA_RULES_FILE="+rules))
	line := c.waitLog(b, "replica: serving", time.Minute)
	var ready struct{ Listen string }
	if err := json.Unmarshal(line.Raw, &ready); err != nil || ready.Listen == "" {
		b.Fatalf("replica: no listen address in %s (%v)", line.Raw, err)
	}
	rc := rest.CopyConfig(admin)
	rc.Host = (&url.URL{Scheme: "https", Host: ready.Listen, Path: "/clusters/" + cluster}).String()
	return c, replicaSide{name: "replica", rc: rc, kubeconfig: writeKubeconfig(b, filepath.Join(dir, "replica.kubeconfig"), rc)}
}

// replicaRules lets replicaUser read ConfigMaps of cluster, in
// docs/replica-access.md's format.
func replicaRules(cluster string) string {
	return fmt.Sprintf(`apiVersion: replica.kubebus.io/v1
kind: AccessRules
grants:
- subjects:
  - {kind: User, name: %s}
  clusters: [%q]
  rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get", "list", "watch"]
`, replicaUser, cluster)
}

// apiServerSide is the side that asks the kube-apiserver directly.
func apiServerSide(cp *controlplane.ControlPlane) replicaSide {
	return replicaSide{name: "kube-apiserver", rc: cp.RESTConfig(), kubeconfig: cp.KubeconfigPath()}
}

// writeKubeconfig writes rc (server, CA data, bearer token) as a
// kubeconfig file at path and returns path.
func writeKubeconfig(b *testing.B, path string, rc *rest.Config) string {
	b.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		b.Fatal(err)
	}
	return path
}

func writeFile(b *testing.B, path, content string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
}
