package pod

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/test/helmtest"
	"github.com/kubebus/bridge/test/kubelet"
	"github.com/kubebus/bridge/test/poll"
)

const (
	chartDir = "../../charts/bridge"
	// kubeVersion is the API server's version, which helm renders for.
	kubeVersion = "1.37.1"
)

// admin is a client of the package's API server as its admin.
func admin(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// helm runs helm against the package's API server, in a home of its
// own, failing t if it fails.
func helm(t testing.TB, args ...string) string {
	t.Helper()
	// Not t.Context(): helm uninstall runs in a cleanup, after it ended.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := helmtest.Run(ctx, t, append(args, "--kubeconfig", cp.KubeconfigPath())...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// release is an installed release of the chart.
type release struct {
	name, namespace string
	// deployment is the release's Deployment as the API server stored it.
	deployment *appsv1.Deployment
}

// install creates namespace and installs the chart as name there with
// valueFiles (relative to the chart) and then overrides, the way a user
// would with -f. It returns once helm has, without waiting for the pods:
// no controller runs here to make them.
func install(t *testing.T, name, namespace string, valueFiles []string, overrides map[string]any) *release {
	t.Helper()
	createNamespace(t, namespace)
	helm(t, append([]string{"install", name, chartDir, "--namespace", namespace}, valueArgs(t, valueFiles, overrides)...)...)
	t.Cleanup(func() {
		// The API server outlives the test: leave nothing cluster-wide.
		if !t.Failed() {
			helm(t, "uninstall", name, "--namespace", namespace)
		}
	})
	return &release{name: name, namespace: namespace, deployment: releaseDeployment(t, name, namespace, "!=replica")}
}

// releaseDeployment is the one Deployment of release name whose
// app.kubernetes.io/component label matches component: "!=replica" for
// the bridge's, "=replica" for the replica's.
func releaseDeployment(t testing.TB, name, namespace, component string) *appsv1.Deployment {
	t.Helper()
	ds, err := admin(t).AppsV1().Deployments(namespace).List(t.Context(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/component" + component,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Items) != 1 {
		t.Fatalf("release %s has %d Deployments with component%s, want 1", name, len(ds.Items), component)
	}
	return &ds.Items[0]
}

// valueArgs are helm's -f arguments for valueFiles (relative to the
// chart) and then overrides.
func valueArgs(t testing.TB, valueFiles []string, overrides map[string]any) []string {
	t.Helper()
	var args []string
	for _, f := range valueFiles {
		args = append(args, "-f", filepath.Join(chartDir, f))
	}
	if overrides != nil {
		// JSON is YAML.
		data, err := json.Marshal(overrides)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "overrides.yaml")
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	return args
}

// renderDeployment is the Deployment that `helm template` renders for
// release name in namespace with valueFiles and overrides, as install
// would have installed it with those values.
func renderDeployment(t testing.TB, name, namespace string, valueFiles []string, overrides map[string]any) *appsv1.Deployment {
	t.Helper()
	manifest := helm(t, append([]string{"template", name, chartDir, "--namespace", namespace, "--kube-version", kubeVersion,
		"--show-only", "templates/deployment.yaml"}, valueArgs(t, valueFiles, overrides)...)...)
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("no Deployment in what helm template rendered: %v\n%s", err, manifest)
		}
		if d.Kind == "Deployment" {
			return &d
		}
	}
}

func createNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := admin(t).CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createSecret creates the Secret a release's existingSecret names.
func createSecret(t testing.TB, namespace, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}
	if _, err := admin(t).CoreV1().Secrets(namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readFile reads a file the test made.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// freePort is a TCP port nothing listens on now, below the range the
// kernel hands out to other sockets (ip_local_port_range starts at 32768
// by default): the pod binds it seconds later, and an ephemeral port could
// be taken by then.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
}

// fastProbes are probe values that keep the chart's paths and ports and
// thresholds but probe every second, so that the tests see a change of
// state in seconds rather than the default tens of seconds.
func fastProbes() map[string]any {
	return map[string]any{
		"livenessProbe":  map[string]any{"periodSeconds": 1},
		"readinessProbe": map[string]any{"periodSeconds": 1},
	}
}

// merge merges maps of values, later ones winning.
func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// waitReady waits until p's readiness probe passes, failing t if the
// container exits first.
func waitReady(t testing.TB, p *kubelet.Pod, timeout time.Duration) {
	t.Helper()
	poll.Until(t, timeout, func() (bool, string) {
		if done, err := p.Exited(); done {
			t.Fatalf("pod %s exited before it was ready: %v\n%s", p.Name(), err, p.Logs())
		}
		if p.Ready() {
			return true, ""
		}
		r, ok := p.Readiness()
		if !ok {
			return false, "no readiness answer yet"
		}
		return false, fmt.Sprintf("readiness %d %q", r.Code, strings.TrimSpace(r.Body))
	})
}

// noRestarts fails t if p's liveness probe ever reached its failure
// threshold: the kubelet would have restarted the bridge.
func noRestarts(t testing.TB, p *kubelet.Pod) {
	t.Helper()
	if f := p.LivenessFailures(); len(f) > 0 {
		t.Errorf("pod %s: the liveness probe failed %d times (first at %s): the kubelet would have restarted it", p.Name(), len(f), f[0].Format(time.TimeOnly))
	}
}

// live lists the objects of gvr in namespace: resourceVersion by name.
func live(t testing.TB, gvr schema.GroupVersionResource, namespace string) map[string]string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	l, err := dyn.Resource(gvr).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range l.Items {
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out
}

// listed is what a consumer's ListerWatcher lists in namespace:
// resourceVersion by name.
func listed(lw cache.ListerWatcher, namespace string) (map[string]string, error) {
	obj, err := cache.ToListerWatcherWithContext(lw).ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			return nil, err
		}
		if m.GetNamespace() == namespace {
			// The object's own resourceVersion is its bus position.
			out[m.GetName()] = m.GetAnnotations()[consumer.AnnotationResourceVersion]
		}
	}
	return out, nil
}

// waitSameState waits until the bus's objects (from lw) equal the API
// server's in namespace, and fails the test with how they differ if they
// do not within timeout.
func waitSameState(t testing.TB, lw cache.ListerWatcher, gvr schema.GroupVersionResource, namespace string, timeout time.Duration) {
	t.Helper()
	poll.Until(t, timeout, func() (bool, string) {
		diff := sameState(t, lw, gvr, namespace)
		return diff == "", diff
	})
}

// checkEnv fails the test for each of want, NAME=value, that the
// container's environment lacks.
func checkEnv(t testing.TB, p *kubelet.Pod, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(p.Env, w) {
			t.Errorf("the container's environment lacks %s", w)
		}
	}
}

// sameState is "" when the bus's objects (from lw) equal the API server's
// in namespace, and says how they differ otherwise.
func sameState(t testing.TB, lw cache.ListerWatcher, gvr schema.GroupVersionResource, namespace string) string {
	t.Helper()
	want := live(t, gvr, namespace)
	got, err := listed(lw, namespace)
	if err != nil {
		return err.Error()
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		switch rv, ok := got[name]; {
		case !ok:
			diffs = append(diffs, name+" missing from the bus")
		case rv != want[name]:
			diffs = append(diffs, fmt.Sprintf("%s at %s on the bus, %s in the API server", name, rv, want[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, name+" on the bus but deleted in the API server")
		}
	}
	return strings.Join(diffs, "; ")
}

// deployment is a Deployment to create; nothing runs it here.
func deployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// checkConfinement checks, from the host, that the bridge runs as the
// chart's securityContext says: user and group 65532 (when the tests run
// as root: otherwise the container keeps the test's user), no_new_privs,
// and a read-only root filesystem.
func checkConfinement(t testing.TB, p *kubelet.Pod) {
	t.Helper()
	status := string(readFile(t, fmt.Sprintf("/proc/%d/status", p.PID())))
	wants := []string{"NoNewPrivs:\t1"}
	if p.AsPodUser() {
		wants = append(wants, "Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532", "Groups:\t65532")
	} else {
		t.Log("the tests do not run as root: the bridge runs as their user, whose ids are not checked")
	}
	for _, want := range wants {
		if !strings.Contains(status, want+"\n") && !strings.Contains(status, want+" \n") {
			t.Errorf("the bridge's /proc status lacks %q:\n%s", want, status)
		}
	}
	rootRO := false
	for line := range strings.Lines(string(readFile(t, fmt.Sprintf("/proc/%d/mountinfo", p.PID())))) {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			rootRO = slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	if !rootRO {
		t.Error("the bridge's root filesystem is not mounted read-only")
	}
}

// metric is the value of an unlabelled metric the bridge on port serves
// on /metrics, or "" when it serves none of that name.
func metric(t testing.TB, port int, name string) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return ""
}
