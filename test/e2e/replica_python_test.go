package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/poll"
)

// pyScript is the Python program the test runs: it lists, then watches,
// the ConfigMaps of a namespace with the Python kubernetes client.
const pyScript = "testdata/replica_client.py"

// The Python kubernetes client (Debian's
// python3-kubernetes, which the project did not write) lists and watches
// ConfigMaps through the replica, with a bearer token and with a client
// certificate, and sees exactly what the API server has: the same objects
// (name, uid, resourceVersion, data) as its LIST, then each change as its
// watch shows it, in order.
func TestReplicaPython(t *testing.T) {
	py := pythonWithClient(t)
	forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
		ns := namespace(t, "replica-py")
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for i := range 5 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("py-%d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
			if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		bridge := startProc(t, procEnv(b.env(ns)), filepath.Join(t.TempDir(), "stdout"))
		t.Cleanup(func() { bridge.terminate(t) })
		caFile, certPEM, keyPEM := pyClientCert(t, t.TempDir(), "alice")
		env := replicaBusEnv(b, ns)
		env["REPLICA_CLIENT_CA_FILE"] = caFile
		r := startReplica(t, env)
		r.untilServed(t, "e2e", replicaToken, configMapsGVR)
		kc := pyKubeconfig(t, r, certPEM, keyPEM)

		// The replica has caught up when the client's list equals the API
		// server's; from then on it must stay equal, with no retry.
		poll.Until(t, 60*time.Second, func() (bool, string) {
			out, err := runPython(t, py, kc, "token", ns)
			if err != nil {
				return false, err.Error()
			}
			got, want := out.listed(), renderObjects(apiObjects(t, ns))
			return got == want, fmt.Sprintf("the Python client lists (token):\n%s\nthe API server:\n%s", got, want)
		})

		// Someone without a rule for the cluster reads nothing.
		if out, err := runPython(t, py, kc, "bob", ns); err == nil || !strings.Contains(err.Error(), "403") || len(out.objects()) > 0 {
			t.Errorf("the Python client as bob: %v, listed %q; want a 403 and nothing", err, out.listed())
		}

		// The watch, with a client certificate, and one on the API server
		// from the same state.
		before, listRV := apiObjectsRV(t, ns)
		api := watchAPI(t, ns, listRV)
		w := startPython(t, py, kc, "cert", ns, 120)
		w.until(t, "the list", func(o pyOutput) bool { return o.hasListed() })
		if got, want := w.output().listed(), renderObjects(before); got != want {
			t.Fatalf("the Python client lists (client certificate):\n%s\nthe API server:\n%s", got, want)
		}

		created, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "py-new"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Data["v"] = "2"
		if _, err := cms.Update(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		old, err := cms.Get(t.Context(), "py-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old.Data["i"] = "changed"
		if _, err := cms.Update(t.Context(), old, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"py-0", "py-new"} {
			if err := cms.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}

		// 2 events of py-new's, its delete, py-1's update and py-0's delete:
		// the API server's watch shows 5, and the client must show the same,
		// each object's in the same order.
		want := api.until(t, 5)
		w.until(t, "the changes as the API server's watch shows them:\n"+want, func(o pyOutput) bool {
			return o.watched() == want
		})
		t.Logf("%s, %d objects listed, watched:\n%s", w.output().client(), len(before), want)
	})
}

// pythonWithClient is the python3 the Makefile names in BRIDGE_TEST_PYTHON
// (Debian's /usr/bin/python3 by default), which must import kubernetes.
func pythonWithClient(t *testing.T) string {
	t.Helper()
	py := os.Getenv("BRIDGE_TEST_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	out, err := exec.Command(py, "-c", "import kubernetes").CombinedOutput()
	if err != nil {
		t.Fatalf("the Python kubernetes client is missing: %s -c 'import kubernetes': %v\n%s"+
			"`make pyclient` installs it from Debian's packages (python3-kubernetes); BRIDGE_TEST_PYTHON names another python3", py, err, out)
	}
	return py
}

// pyClientCert writes a CA to dir and returns its file, with a client
// certificate it signed for user (as CN) and the certificate's key.
func pyClientCert(t *testing.T, dir, user string) (caFile string, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "replica-e2e-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "client-ca.crt")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	return caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// pyKubeconfig writes a kubeconfig for cluster e2e on r with three
// contexts: "token" (alice's token), "cert" (alice's client certificate)
// and "bob" (a token the rules grant nothing).
func pyKubeconfig(t *testing.T, r *replicaProc, certPEM, keyPEM []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: replica
  cluster:
    server: https://%s/clusters/e2e
    certificate-authority-data: %s
users:
- name: alice-token
  user:
    token: %s
- name: alice-cert
  user:
    client-certificate-data: %s
    client-key-data: %s
- name: bob
  user:
    token: replica-e2e-token-bob
contexts:
- name: token
  context: {cluster: replica, user: alice-token}
- name: cert
  context: {cluster: replica, user: alice-cert}
- name: bob
  context: {cluster: replica, user: bob}
current-context: token
`, r.addr, b64(r.caPEM), replicaToken, b64(certPEM), b64(keyPEM)))
	return path
}

// pyLine is one line the Python program prints (see its doc string).
type pyLine struct {
	Kind               string            `json:"kind"`
	Version            string            `json:"version,omitempty"`
	Type               string            `json:"type,omitempty"`
	Name               string            `json:"name,omitempty"`
	Namespace          string            `json:"namespace,omitempty"`
	UID                string            `json:"uid,omitempty"`
	APIResourceVersion string            `json:"apiResourceVersion,omitempty"`
	Data               map[string]string `json:"data,omitempty"`
	ResourceVersion    string            `json:"resourceVersion,omitempty"`
	Count              int               `json:"count,omitempty"`
	Reason             string            `json:"reason,omitempty"`
}

// pyOutput is what the Python program printed, in order.
type pyOutput []pyLine

func (o pyOutput) objects() []pyLine {
	var out []pyLine
	for _, l := range o {
		if l.Kind == "object" {
			out = append(out, l)
		}
	}
	return out
}

func (o pyOutput) hasListed() bool {
	return slices.ContainsFunc(o, func(l pyLine) bool { return l.Kind == "listed" })
}

func (o pyOutput) client() string {
	for _, l := range o {
		if l.Kind == "client" {
			return "python kubernetes " + l.Version
		}
	}
	return "python kubernetes (version not printed)"
}

// listed renders what the list returned, one object a line, sorted by
// name. An object listed twice is rendered twice, and a "listed" line
// whose count disagrees is rendered too, so that neither compares equal.
func (o pyOutput) listed() string {
	var lines []string
	for _, l := range o.objects() {
		lines = append(lines, renderObject(l.Namespace+"/"+l.Name, l.UID, l.APIResourceVersion, l.Data))
	}
	slices.Sort(lines)
	for _, l := range o {
		if l.Kind == "listed" && l.Count != len(lines) {
			lines = append(lines, fmt.Sprintf("(the list says %d objects)", l.Count))
		}
	}
	return strings.Join(lines, "\n")
}

// watched renders the watch's events per object, sorted by name: the
// order between objects is not defined, each object's own is.
func (o pyOutput) watched() string {
	var evs []apiEvent
	for _, l := range o {
		if l.Kind == "event" {
			evs = append(evs, apiEvent{typ: l.Type, name: l.Namespace + "/" + l.Name, uid: l.UID, rv: l.APIResourceVersion, data: l.Data})
		}
	}
	return renderEvents(evs)
}

func renderObject(name, uid, rv string, data map[string]string) string {
	return fmt.Sprintf("%s uid=%s rv=%s data=%s", name, uid, rv, renderData(data))
}

func renderData(data map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(data)) {
		kv = append(kv, k+"="+data[k])
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// apiObjects is the API server's LIST of the ConfigMaps of ns.
func apiObjects(t *testing.T, ns string) []corev1.ConfigMap {
	l, _ := apiObjectsRV(t, ns)
	return l
}

func apiObjectsRV(t *testing.T, ns string) ([]corev1.ConfigMap, string) {
	t.Helper()
	l, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items, l.ResourceVersion
}

func renderObjects(items []corev1.ConfigMap) string {
	var lines []string
	for _, cm := range items {
		lines = append(lines, renderObject(cm.Namespace+"/"+cm.Name, string(cm.UID), cm.ResourceVersion, cm.Data))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// apiEvent is one event of a watch: the API server's, or the client's
// through the replica with the API server's resourceVersion.
type apiEvent struct {
	typ, name, uid, rv string
	data               map[string]string
}

// renderEvents renders evs one object a line, sorted by name, each
// object's events in their order; a DELETED's data is left out, since the
// bus keeps a deleted object's identity, not its content.
func renderEvents(evs []apiEvent) string {
	per := map[string][]string{}
	for _, e := range evs {
		s := fmt.Sprintf("%s uid=%s rv=%s", e.typ, e.uid, e.rv)
		if e.typ != string(watch.Deleted) {
			s += " data=" + renderData(e.data)
		}
		per[e.name] = append(per[e.name], s)
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(per)) {
		lines = append(lines, name+": "+strings.Join(per[name], ", "))
	}
	return strings.Join(lines, "\n")
}

// apiWatch is a watch on the API server, from a resourceVersion on.
type apiWatch struct {
	mu  sync.Mutex
	evs []apiEvent
}

func watchAPI(t *testing.T, ns, rv string) *apiWatch {
	t.Helper()
	wi, err := kube(t).CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wi.Stop)
	a := &apiWatch{}
	go func() {
		for e := range wi.ResultChan() {
			cm, ok := e.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			a.mu.Lock()
			a.evs = append(a.evs, apiEvent{typ: string(e.Type), name: cm.Namespace + "/" + cm.Name, uid: string(cm.UID), rv: cm.ResourceVersion, data: cm.Data})
			a.mu.Unlock()
		}
	}()
	return a
}

// until waits for n events and renders them.
func (a *apiWatch) until(t *testing.T, n int) string {
	t.Helper()
	var out string
	poll.Until(t, 30*time.Second, func() (bool, string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		out = renderEvents(a.evs)
		return len(a.evs) >= n, fmt.Sprintf("the API server's watch: %d events, want %d:\n%s", len(a.evs), n, out)
	})
	return out
}

// pyRun is the Python program running, its output read as it comes.
type pyRun struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed once it has exited
	mu     sync.Mutex
	lines  pyOutput
	stderr bytes.Buffer
	bad    []string // stdout lines that are not JSON
}

// startPython runs the program against context of kubeconfig, on the
// ConfigMaps of ns, watching for timeout seconds (0: list only).
func startPython(t *testing.T, py, kubeconfig, context, ns string, timeout int) *pyRun {
	t.Helper()
	r := &pyRun{done: make(chan struct{})}
	r.cmd = exec.Command(py, pyScript, "--kubeconfig", kubeconfig, "--context", context, "--namespace", ns, "--timeout", fmt.Sprint(timeout))
	r.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	r.cmd.Stderr = &lockedWriter{mu: &r.mu, w: &r.stderr}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	if err := controlplane.StartTied(r.cmd, exited); err != nil {
		t.Fatalf("start %s: %v", py, err)
	}
	// The reader below waits for the process; the cleanup only kills it.
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l pyLine
			err := json.Unmarshal(sc.Bytes(), &l)
			r.mu.Lock()
			if err != nil {
				r.bad = append(r.bad, sc.Text())
			} else {
				r.lines = append(r.lines, l)
			}
			r.mu.Unlock()
		}
		_ = r.cmd.Wait()
		close(exited)
	}()
	return r
}

func (r *pyRun) output() pyOutput {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

func (r *pyRun) describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, l := range r.lines {
		j, _ := json.Marshal(l)
		fmt.Fprintf(&b, "  %s\n", j)
	}
	for _, l := range r.bad {
		fmt.Fprintf(&b, "  (not JSON) %s\n", l)
	}
	fmt.Fprintf(&b, "stderr: %q", r.stderr.String())
	return b.String()
}

// until polls until ok holds of the output so far; the program's exit
// fails the test at once.
func (r *pyRun) until(t *testing.T, what string, ok func(pyOutput) bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		if ok(r.output()) {
			return true, ""
		}
		select {
		case <-r.done:
			t.Fatalf("the Python client exited (%v) before %s; it printed:\n%s", r.cmd.ProcessState, what, r.describe())
		default:
		}
		return false, fmt.Sprintf("the Python client: waiting for %s; it printed:\n%s", what, r.describe())
	})
}

// runPython runs the program to list only, and returns its output, with
// an error that carries its stderr if it failed.
func runPython(t *testing.T, py, kubeconfig, context, ns string) (pyOutput, error) {
	t.Helper()
	r := startPython(t, py, kubeconfig, context, ns, 0)
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		return r.output(), errors.New("the Python client did not exit within 60s:\n" + r.describe())
	}
	if !r.cmd.ProcessState.Success() || len(r.bad) > 0 {
		return r.output(), fmt.Errorf("the Python client: %v:\n%s", r.cmd.ProcessState, r.describe())
	}
	return r.output(), nil
}
