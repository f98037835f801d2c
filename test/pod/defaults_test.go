package pod

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/kubelet"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// events decodes the stdout sink's lines: one event per line.
func events(t *testing.T, stdout string) []*wire.Message {
	t.Helper()
	var out []*wire.Message
	for line := range strings.Lines(stdout) {
		if !strings.HasSuffix(line, "\n") {
			break // being written
		}
		m := &wire.Message{}
		if err := m.UnmarshalJSON([]byte(line)); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// of are the events about namespace's objects, as "action name".
func of(msgs []*wire.Message, namespace string) []string {
	var out []string
	for _, m := range msgs {
		if m.Namespace == namespace {
			out = append(out, m.Action+" "+m.Name)
		}
	}
	return out
}

// TestChartPodDefaults runs the pod of the chart's defaults, the first
// install a user makes: the stdout sink, and the checkpoint in a file on
// the release's PersistentVolumeClaim, which the pod, as user 65532 with
// fsGroup, must be able to write on its read-only root. A second pod on
// the same claim publishes exactly what changed while no pod ran, deletes
// included, and nothing else.
//
// Not parallel: the defaults watch ConfigMaps in every namespace, and the
// other tests' changes would be published too.
func TestChartPodDefaults(t *testing.T) {
	const namespace, apps = "bridge-system", "defaults-app"
	createNamespace(t, namespace)
	createNamespace(t, apps)
	port := freePort(t)
	rel := install(t, "bridge", namespace, nil, merge(fastProbes(), map[string]any{
		"metrics": map[string]any{"port": port},
	}))
	node := kubelet.NewNode(t, cp.RESTConfig(), kubelet.BridgeImage(t))
	cms := admin(t).CoreV1().ConfigMaps(apps)
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: apps}, Data: map[string]string{"k": name}}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("kept")

	first := node.Run(t, kubelet.PodOf(rel.deployment, "7b9d6f5c4-m3n8p"))
	waitReady(t, first, 2*time.Minute)
	// The Go runtime knows the container's memory limit (512Mi).
	if !slices.Contains(first.Env, "GOMEMLIMIT=536870912") {
		t.Errorf("the container's environment has no GOMEMLIMIT of its 512Mi limit")
	}
	if got := metric(t, port, "go_gc_gomemlimit_bytes"); got != "5.36870912e+08" {
		t.Errorf("go_gc_gomemlimit_bytes = %q, want the 512Mi limit", got)
	}
	create("first")
	poll.Until(t, 30*time.Second, func() (bool, string) {
		got := of(events(t, first.Stdout()), apps)
		return strings.Join(got, ",") == "added kept,added first", fmt.Sprint(got)
	})
	if _, err := first.Stop(); err != nil {
		t.Fatalf("the first pod ended with %v on SIGTERM, want exit 0\n%s", err, first.Logs())
	}
	noRestarts(t, first)

	// While no pod runs.
	create("second")
	if err := cms.Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	second := node.Run(t, kubelet.PodOf(rel.deployment, "7b9d6f5c4-r5t2v"))
	waitReady(t, second, 2*time.Minute)
	// Each object's events are in order; objects are not in an order.
	got := of(events(t, second.Stdout()), apps)
	slices.Sort(got)
	if strings.Join(got, ",") != "added second,deleted first" {
		t.Errorf("the second pod published %v about %s, want exactly [added second deleted first]", got, apps)
	}
	// Nothing of any other namespace either: every other object is as the
	// first pod published it.
	if all := events(t, second.Stdout()); len(all) != len(got) {
		t.Errorf("the second pod published %d events, %d of them outside %s: the checkpoint did not carry over", len(all), len(all)-len(got), apps)
	}
	noRestarts(t, second)
}
