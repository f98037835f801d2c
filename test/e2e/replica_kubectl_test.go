package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubebus/bridge/resourceversion"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/poll"
)

// forEachReplicaBus runs f on each bus a replica reads: NATS in the state layout,
// or Kafka (whose topics the bridge makes compacted, its state layout).
func forEachReplicaBus(t *testing.T, f func(t *testing.T, b bus)) {
	forEachBusWith(t, busOptions{natsLayout: string(natssink.LayoutState)}, f)
}

// replicaOf runs a bridge that publishes the ConfigMaps of a new namespace
// to b, with the discovery document of its cluster "e2e", and a replica
// of that bus. It returns the namespace and the replica once the replica
// serves the cluster's ConfigMaps in its discovery.
func replicaOf(t *testing.T, b bus) (string, *replicaProc) {
	t.Helper()
	ns := namespace(t, "replica")
	p := startProc(t, procEnv(b.env(ns)), filepath.Join(t.TempDir(), "stdout"))
	t.Cleanup(func() { p.terminate(t) })
	r := startReplica(t, replicaBusEnv(b, ns))
	r.untilServed(t, "e2e", replicaToken, configMapsGVR)
	return ns, r
}

// configMapsGVR is the resource the bridges of the replica's tests watch.
var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// replicaBusEnv configures a replica to read what a bridge configured
// with b.env(ns) publishes.
func replicaBusEnv(b bus, ns string) map[string]string {
	switch b := b.(type) {
	case *natsBus:
		return map[string]string{"REPLICA_BUS": "nats", "REPLICA_NATS_URL": b.srv.URL()}
	case *kafkaBus:
		return map[string]string{"REPLICA_BUS": "kafka", "REPLICA_KAFKA_BROKERS": strings.Join(b.c.Addrs(), ","), "REPLICA_KAFKA_TOPIC_PREFIX": "kube-" + ns}
	}
	panic(fmt.Sprintf("no replica for bus %s", b.name()))
}

// labelledConfigMaps creates n ConfigMaps rcm-0... in ns, the even ones
// labelled tier=even.
func labelledConfigMaps(t *testing.T, ns string, n int) {
	t.Helper()
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rcm-%d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if i%2 == 0 {
			cm.Labels = map[string]string{"tier": "even"}
		}
		if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// kubectlVersions runs kubectl get with -o json and reads what it lists.
func kubectlVersions(t *testing.T, kubeconfig string, args ...string) (versions, error) {
	out, err := kubectl(t, kubeconfig, append(args, "-o", "json")...)
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return nil, fmt.Errorf("kubectl output: %v", err)
	}
	var metas []metav1.ObjectMeta
	for _, it := range l.Items {
		metas = append(metas, it.Metadata)
	}
	return replicaVersionsOf(metas), nil
}

// untilSame polls until got equals what the API server lists.
func untilSame(t *testing.T, what string, want func() versions, got func() (versions, error)) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		w := want()
		g, err := got()
		if err != nil {
			return false, err.Error()
		}
		return w.equal(g), fmt.Sprintf("%s: the replica shows %v; the API server %v", what, g, w)
	})
}

// Kubectl against the replica shows what LIST on the
// API server shows, in each of the forms kubectl asks for.
func TestReplicaKubectl(t *testing.T) {
	forEachReplicaBus(t, func(t *testing.T, b bus) {
		ns, r := replicaOf(t, b)
		labelledConfigMaps(t, ns, 5)
		kc := r.kubeconfig(t, "e2e")
		all := func() versions { return apiVersions(t, ns, "") }

		untilSame(t, "get cm -n", all, func() (versions, error) { return kubectlVersions(t, kc, "get", "cm", "-n", ns) })
		untilSame(t, "get configmaps -A", all, func() (versions, error) { return kubectlVersions(t, kc, "get", "configmaps", "-A") })
		untilSame(t, "get cm -l tier=even", func() versions { return apiVersions(t, ns, "tier=even") },
			func() (versions, error) { return kubectlVersions(t, kc, "get", "cm", "-n", ns, "-l", "tier=even") })
		untilSame(t, "--field-selector metadata.name=rcm-3", func() versions {
			v := all()
			return versions{ns + "/rcm-3": v[ns+"/rcm-3"]}
		}, func() (versions, error) {
			return kubectlVersions(t, kc, "get", "cm", "-n", ns, "--field-selector", "metadata.name=rcm-3")
		})
		untilSame(t, "--chunk-size=2", all, func() (versions, error) { return kubectlVersions(t, kc, "get", "cm", "-n", ns, "--chunk-size=2") })

		// -o yaml: the same objects, their data included.
		out, err := kubectl(t, kc, "get", "cm", "-n", ns, "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		var l corev1.ConfigMapList
		if err := yaml.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("-o yaml: %v\n%s", err, out)
		}
		var metas []metav1.ObjectMeta
		for _, cm := range l.Items {
			metas = append(metas, cm.ObjectMeta)
			if want := strings.TrimPrefix(cm.Name, "rcm-"); cm.Data["i"] != want {
				t.Errorf("-o yaml: %s has data %v, want i=%s", cm.Name, cm.Data, want)
			}
		}
		if got, want := replicaVersionsOf(metas), all(); !got.equal(want) {
			t.Errorf("-o yaml shows %v; the API server %v", got, want)
		}

		// -o wide and the default table: a row per object, with the columns.
		for _, args := range [][]string{{"get", "cm", "-n", ns}, {"get", "cm", "-n", ns, "-o", "wide"}} {
			out, err := kubectl(t, kc, args...)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if h := strings.Fields(lines[0]); strings.Join(h, " ") != "NAME DATA AGE" {
				t.Errorf("kubectl %v: header %q, want NAME DATA AGE", args, lines[0])
			}
			var names []string
			for _, line := range lines[1:] {
				f := strings.Fields(line)
				names = append(names, ns+"/"+f[0])
				if f[1] != "1" {
					t.Errorf("kubectl %v: row %q: DATA %s, want 1", args, line, f[1])
				}
			}
			if got, want := strings.Join(names, ","), strings.Join(all().names(), ","); got != want {
				t.Errorf("kubectl %v lists %s; the API server %s", args, got, want)
			}
		}

		// A write is refused, naming the cluster's API server.
		_, err = kubectl(t, kc, "delete", "cm", "-n", ns, "rcm-1")
		if err == nil || !strings.Contains(err.Error(), "read-only replica of cluster \"e2e\"") || !strings.Contains(err.Error(), cp.APIServerURL()) {
			t.Errorf("kubectl delete: %v; want the replica's refusal naming %s", err, cp.APIServerURL())
		}
		if _, err := kube(t).CoreV1().ConfigMaps(ns).Get(t.Context(), "rcm-1", metav1.GetOptions{}); err != nil {
			t.Errorf("rcm-1 after the refused delete: %v", err)
		}
	})
}

func (v versions) names() []string {
	out := make([]string, 0, len(v))
	for k := range v {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

// Kubectl get -w through the replica sees a create, an
// update and a delete.
func TestReplicaKubectlWatch(t *testing.T) {
	forEachReplicaBus(t, func(t *testing.T, b bus) {
		ns, r := replicaOf(t, b)
		labelledConfigMaps(t, ns, 2)
		kc := r.kubeconfig(t, "e2e")
		untilSame(t, "get cm", func() versions { return apiVersions(t, ns, "") },
			func() (versions, error) { return kubectlVersions(t, kc, "get", "cm", "-n", ns) })

		w := startKubectlWatch(t, kc, "get", "cm", "-n", ns, "-w", "-o", "json", "--output-watch-events")
		// The initial state first.
		w.until(t, "the initial ADDEDs", func(evs []watchLine) bool {
			return countType(evs, "ADDED") >= 2
		})
		cms := kube(t).CoreV1().ConfigMaps(ns)
		created, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Data = map[string]string{"changed": "yes"}
		updated, err := cms.Update(t.Context(), created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(t.Context(), "watched", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.until(t, "ADDED, MODIFIED and DELETED of watched", func(evs []watchLine) bool {
			var seq []string
			deleted := false
			for _, e := range evs {
				if e.Object.Metadata.Name != "watched" {
					continue
				}
				rv := e.Object.Metadata.Annotations["kubebus.io/resource-version"]
				if e.Type == "DELETED" {
					// A delete is dated by the API server's delete event,
					// after the last update.
					deleted = resourceversion.Before(updated.ResourceVersion, rv)
					rv = "later"
				}
				seq = append(seq, e.Type+"@"+rv)
			}
			want := []string{"ADDED@" + created.ResourceVersion, "MODIFIED@" + updated.ResourceVersion, "DELETED@later"}
			return deleted && strings.Join(seq, ",") == strings.Join(want, ",")
		})
	})
}

// Client-go's typed clientset and a SharedInformerFactory
// pointed at the replica see what LIST on the API server shows.
func TestReplicaClientGo(t *testing.T) {
	forEachReplicaBus(t, func(t *testing.T, b bus) {
		ns, r := replicaOf(t, b)
		labelledConfigMaps(t, ns, 6)
		c, err := kubernetes.NewForConfig(r.restConfig("e2e", replicaToken))
		if err != nil {
			t.Fatal(err)
		}
		all := func() versions { return apiVersions(t, ns, "") }
		untilSame(t, "clientset List", all, func() (versions, error) {
			l, err := c.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var metas []metav1.ObjectMeta
			for _, cm := range l.Items {
				metas = append(metas, cm.ObjectMeta)
			}
			return replicaVersionsOf(metas), nil
		})
		cm, err := c.CoreV1().ConfigMaps(ns).Get(t.Context(), "rcm-2", metav1.GetOptions{})
		if err != nil || cm.Data["i"] != "2" {
			t.Fatalf("clientset Get rcm-2: %v, %v", cm, err)
		}

		f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
		lister := f.Core().V1().ConfigMaps().Lister()
		f.Start(t.Context().Done())
		t.Cleanup(f.Shutdown)
		for typ, ok := range f.WaitForCacheSync(t.Context().Done()) {
			if !ok {
				t.Fatalf("informer of %v did not sync", typ)
			}
		}
		fromInformer := func() (versions, error) {
			l, err := lister.List(labels.Everything())
			if err != nil {
				return nil, err
			}
			var metas []metav1.ObjectMeta
			for _, cm := range l {
				metas = append(metas, cm.ObjectMeta)
			}
			return replicaVersionsOf(metas), nil
		}
		untilSame(t, "informer", all, fromInformer)
		// Changes reach the informer through the replica's watch.
		if err := kube(t).CoreV1().ConfigMaps(ns).Delete(t.Context(), "rcm-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		labelledConfigMaps2(t, ns)
		untilSame(t, "informer after changes", all, fromInformer)

		// A write is refused with 405; no credentials, 401; a user without a
		// rule, 403.
		_, err = c.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nope"}}, metav1.CreateOptions{})
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("create through the replica: %v, want 405", err)
		}
		anon, err := kubernetes.NewForConfig(r.restConfig("e2e", ""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anon.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			t.Errorf("list without credentials: %v, want 401", err)
		}
		bob, err := kubernetes.NewForConfig(r.restConfig("e2e", "replica-e2e-token-bob"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bob.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("list by a user without a rule: %v, want 403", err)
		}
	})
}

// labelledConfigMaps2 creates one more ConfigMap and updates another.
func labelledConfigMaps2(t *testing.T, ns string) {
	t.Helper()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := cms.Get(t.Context(), "rcm-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["i"] = "changed"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
