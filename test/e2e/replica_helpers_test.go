package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/poll"
)

// replicaBin is the replica binary, built once, beside the bridge's.
var (
	replicaBin     string
	replicaBuild   sync.Once
	replicaBuildOK bool
)

func buildReplica(t *testing.T) string {
	t.Helper()
	replicaBuild.Do(func() {
		replicaBin = filepath.Join(filepath.Dir(bridgeBin), "replica")
		out, err := exec.Command("go", "build", "-o", replicaBin, "github.com/kubebus/bridge/cmd/replica").CombinedOutput()
		if err != nil {
			t.Logf("build replica: %v\n%s", err, out)
			return
		}
		replicaBuildOK = true
	})
	if !replicaBuildOK {
		t.Fatal("the replica binary did not build")
	}
	return replicaBin
}

// replicaToken is the bearer token of the user "alice", whom the rules let
// read cluster e2e.
const replicaToken = "replica-e2e-token-alice"

// replicaRules are the replica's access rules (docs/replica-access.md):
// alice may get, list and watch everything but secrets on cluster e2e,
// carol on every cluster; bob has no grant.
const replicaRules = `apiVersion: replica.kubebus.io/v1
kind: AccessRules
grants:
- subjects: [{kind: User, name: alice}]
  clusters: [e2e]
  rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: [get, list, watch]}
- subjects: [{kind: User, name: carol}]
  clusters: ["*"]
  rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
`

// replicaProc is the replica running as a child process.
type replicaProc struct {
	addr  string // host:port of the API
	caPEM []byte
	done  chan struct{}
	mu    sync.Mutex
	logs  bytes.Buffer
	cmd   *exec.Cmd
	ready chan string
}

func (p *replicaProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// startReplica runs the replica with busEnv (its REPLICA_BUS... variables)
// and waits until it is ready.
func startReplica(t *testing.T, busEnv map[string]string) *replicaProc {
	t.Helper()
	bin := buildReplica(t)
	dir := t.TempDir()
	certFile, keyFile, caPEM := serverCert(t, dir)
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, replicaToken+",alice,uid-alice,readers\nreplica-e2e-token-bob,bob,uid-bob,\nreplica-e2e-token-carol,carol,uid-carol,\n")
	rules := filepath.Join(dir, "rules.yaml")
	writeFile(t, rules, replicaRules)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"REPLICA_LISTEN=127.0.0.1:0",
		"REPLICA_METRICS_ADDR=127.0.0.1:0",
		"REPLICA_TLS_CERT_FILE=" + certFile,
		"REPLICA_TLS_KEY_FILE=" + keyFile,
		"REPLICA_TOKEN_FILE=" + tokens,
		"REPLICA_RULES_FILE=" + rules,
		"REPLICA_LOG_LEVEL=debug",
	}
	for k, v := range busEnv {
		env = append(env, k+"="+v)
	}
	p := &replicaProc{caPEM: caPEM, done: make(chan struct{}), ready: make(chan string, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	controlplane.StartTiedUntilCleanup(t, p.cmd, p.done)
	go p.watchLogs(stderr)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica logs:\n%s", p.logText())
		}
	})
	select {
	case p.addr = <-p.ready:
	case <-p.done:
		t.Fatalf("replica exited before it was ready:\n%s", p.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("replica not ready after 30s:\n%s", p.logText())
	}
	return p
}

func (p *replicaProc) watchLogs(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		p.mu.Lock()
		p.logs.Write(line)
		p.logs.WriteByte('\n')
		p.mu.Unlock()
		var rec struct {
			Msg    string
			Listen string
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "replica: serving" {
			p.ready <- rec.Listen
		}
	}
}

// restConfig reaches cluster (or "*") on the replica with token ("" for
// none).
func (p *replicaProc) restConfig(cluster, token string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + p.addr + "/clusters/" + cluster,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM},
		QPS:             -1,
		Timeout:         10 * time.Second,
	}
}

// untilServed polls, as token, until the replica serves the discovery of
// cluster (or "*") with every resource of gvrs: the bridge publishes its
// discovery document about a second after it starts, and until the
// replica reads it the cluster is not on the bus (404).
func (p *replicaProc) untilServed(t *testing.T, cluster, token string, gvrs ...schema.GroupVersionResource) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(p.restConfig(cluster, token))
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		for _, gvr := range gvrs {
			l, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
			if err != nil {
				return false, fmt.Sprintf("discovery of cluster %q: %v", cluster, err)
			}
			if !slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }) {
				return false, fmt.Sprintf("discovery of cluster %q: no %s in %s", cluster, gvr.Resource, gvr.GroupVersion())
			}
		}
		return true, ""
	})
}

// kubeconfig writes a kubeconfig for cluster on the replica, as alice.
func (p *replicaProc) kubeconfig(t *testing.T, cluster string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: replica
  cluster:
    server: https://%s/clusters/%s
    certificate-authority-data: %s
users:
- name: alice
  user:
    token: %s
contexts:
- name: replica
  context: {cluster: replica, user: alice}
current-context: replica
`, p.addr, cluster, b64(p.caPEM), replicaToken)
	writeFile(t, path, cfg)
	return path
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serverCert writes a self-signed certificate for 127.0.0.1 and returns
// its files and PEM.
func serverCert(t *testing.T, dir string) (certFile, keyFile string, certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "replica"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, string(certPEM))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
	return certFile, keyFile, certPEM
}

// versions maps each name to the API server's resourceVersion of its
// object: the objects' own for the API server, the annotation for the
// replica.
type versions map[string]string

func (v versions) String() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s@%s ", k, v[k])
	}
	return b.String()
}

func (v versions) equal(w versions) bool {
	if len(v) != len(w) {
		return false
	}
	for k, rv := range v {
		if w[k] != rv {
			return false
		}
	}
	return true
}

// apiVersions reads the ConfigMaps of ns from the API server.
func apiVersions(t *testing.T, ns, selector string) versions {
	t.Helper()
	l, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	out := versions{}
	for _, cm := range l.Items {
		out[cm.Namespace+"/"+cm.Name] = cm.ResourceVersion
	}
	return out
}

// replicaVersionsOf reads objects' metadata as the replica serves them.
func replicaVersionsOf(items []metav1.ObjectMeta) versions {
	out := versions{}
	for _, m := range items {
		out[m.Namespace+"/"+m.Name] = m.Annotations[consumer.AnnotationResourceVersion]
	}
	return out
}

// kubectl runs the real kubectl with kubeconfig and returns its stdout.
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(filepath.Dir(kubeconfig), "cache")}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func sortStrings(s []string) { sort.Strings(s) }

// watchLine is one event kubectl get -w --output-watch-events -o json
// prints.
type watchLine struct {
	Type   string `json:"type"`
	Object struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	} `json:"object"`
}

func countType(evs []watchLine, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// kubectlWatch is a kubectl get -w running until the test ends.
type kubectlWatch struct {
	mu     sync.Mutex
	events []watchLine
	stderr bytes.Buffer
	done   chan struct{}
}

func startKubectlWatch(t *testing.T, kubeconfig string, args ...string) *kubectlWatch {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(filepath.Dir(kubeconfig), "cache")}, args...)...)
	w := &kubectlWatch{done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &w.mu, w: &w.stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	controlplane.StartTiedUntilCleanup(t, cmd, w.done)
	go func() {
		defer close(w.done)
		dec := json.NewDecoder(out)
		for {
			var e watchLine
			if err := dec.Decode(&e); err != nil {
				return
			}
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
		}
	}()
	return w
}

// until polls until ok holds of the events seen so far.
func (w *kubectlWatch) until(t *testing.T, what string, ok func([]watchLine) bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		var seen []string
		for _, e := range w.events {
			seen = append(seen, e.Type+" "+e.Object.Metadata.Name+"@"+e.Object.Metadata.Annotations[consumer.AnnotationResourceVersion])
		}
		return ok(w.events), fmt.Sprintf("kubectl -w: waiting for %s; saw %v; stderr %q", what, seen, w.stderr.String())
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
