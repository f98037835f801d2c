package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/internal/replica"
	"github.com/kubebus/bridge/test/natstest"
)

// clusterVersions reads a list of the all-clusters view: cluster/ns/name
// to the API server's resourceVersion.
func clusterVersions(l *corev1.ConfigMapList) versions {
	out := versions{}
	for _, cm := range l.Items {
		out[cm.Annotations[replica.AnnotationCluster]+"/"+cm.Namespace+"/"+cm.Name] = cm.Annotations[consumer.AnnotationResourceVersion]
	}
	return out
}

// The all-clusters view merges every cluster's objects,
// each tagged with its cluster, and shows an identity only the clusters
// its rules let it read; a watch from the merged list's resourceVersion
// sees changes of every cluster.
func TestReplicaAllClusters(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	// Each cluster's bridge watches a namespace of its own: the bus
	// deduplicates messages by object uid and resourceVersion, so two
	// bridges of one API server must not publish the same objects.
	nss := map[string]string{"e2e": namespace(t, "replica-all"), "e2e-two": namespace(t, "replica-all")}
	for _, cluster := range []string{"e2e", "e2e-two"} {
		ns := nss[cluster]
		env := natsEnv(srv, ns, map[string]string{"BRIDGE_NATS_LAYOUT": "state", "BRIDGE_CHECKPOINT": "nats-kv:ckpt-" + cluster + "-" + ns, "BRIDGE_CLUSTER_NAME": cluster})
		p := startProc(t, procEnv(env), filepath.Join(t.TempDir(), "stdout"))
		t.Cleanup(func() { p.terminate(t) })
	}
	r := startReplica(t, map[string]string{"REPLICA_BUS": "nats", "REPLICA_NATS_URL": srv.URL()})
	r.untilServed(t, "e2e", replicaToken, configMapsGVR)
	r.untilServed(t, "e2e-two", "replica-e2e-token-carol", configMapsGVR)
	labelledConfigMaps(t, nss["e2e"], 3)
	labelledConfigMaps(t, nss["e2e-two"], 2)
	const ns = "" // every namespace

	want := func() versions {
		out := versions{}
		for cluster, ns := range nss {
			for k, rv := range apiVersions(t, ns, "") {
				out[cluster+"/"+k] = rv
			}
		}
		return out
	}
	carol, err := kubernetes.NewForConfig(r.restConfig("*", "replica-e2e-token-carol"))
	if err != nil {
		t.Fatal(err)
	}
	var last *corev1.ConfigMapList
	untilSame(t, "all clusters, for carol", want, func() (versions, error) {
		l, err := carol.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
		last = l
		if err != nil {
			return nil, err
		}
		return clusterVersions(l), nil
	})

	// alice may read e2e only: the view shows her e2e's objects alone.
	alice, err := kubernetes.NewForConfig(r.restConfig("*", replicaToken))
	if err != nil {
		t.Fatal(err)
	}
	l, err := alice.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantAlice := versions{}
	for k, rv := range want() {
		if strings.HasPrefix(k, "e2e/") {
			wantAlice[k] = rv
		}
	}
	if got := clusterVersions(l); !got.equal(wantAlice) {
		t.Errorf("all clusters, for alice: %v; want %v", got, wantAlice)
	}

	// Pages of the merged list hold every object once.
	got := versions{}
	opts := metav1.ListOptions{Limit: 2}
	for {
		page, err := carol.CoreV1().ConfigMaps(ns).List(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range clusterVersions(page) {
			if _, dup := got[k]; dup {
				t.Errorf("%s in two pages", k)
			}
			got[k] = v
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	if w := want(); !got.equal(w) {
		t.Errorf("the pages hold %v; want %v", got, w)
	}

	// A watch from the list's resourceVersion sees a new object in both
	// clusters.
	wi, err := carol.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: last.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	for _, ns := range nss {
		if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(seen) < 2 {
		select {
		case e, ok := <-wi.ResultChan():
			if !ok {
				t.Fatalf("watch ended; saw %v", seen)
			}
			cm, isCM := e.Object.(*corev1.ConfigMap)
			if !isCM {
				t.Fatalf("watch event %s of %T", e.Type, e.Object)
			}
			if e.Type != watch.Added || cm.Name != "fresh" {
				t.Errorf("watch from the list's position: %s %s, want only ADDED fresh", e.Type, cm.Name)
				continue
			}
			seen[cm.Annotations[replica.AnnotationCluster]] = true
		case <-deadline:
			t.Fatalf("after 30s the watch saw fresh in %v, want e2e and e2e-two", seen)
		}
	}
}
