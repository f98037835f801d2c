package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/poll"
)

// Issue 25, item 4: two clusters (two API servers) whose bridges, named
// east and west, write the ConfigMaps of a namespace of the same name to
// one history-layout topic, under the same keys. Each deletes some of
// them (some in both, some in one). Every tombstone names its cluster,
// and each cluster's informer, live through the deletes and started
// afresh after them, equals its own cluster's LIST: no delete of one
// cluster, nor its tombstone, reaches the other's objects.
func TestKafkaTombstonesOfTwoClusters(t *testing.T) {
	const objects = 20
	westCP := controlplane.ForTest(t)
	west, err := kubernetes.NewForConfig(westCP.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	east := kube(t)
	ns := namespace(t, "tombstones")
	if _, err := west.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := kafkatest.Start(t)
	prefix := "kube-" + ns
	topic := prefix + ".configmaps"
	// One partition: the log is one order, so that an informer holding a
	// record has read every record before it.
	c.CreateTopic(topic, 1, nil)
	create := func(kc kubernetes.Interface, name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range objects {
		create(east, fmt.Sprintf("cm-%03d", i))
		create(west, fmt.Sprintf("cm-%03d", i))
	}
	bridgeEnv := func(cluster string, kv ...string) []string {
		return procEnv(kafkaEnv(c, append([]string{
			"BRIDGE_RESOURCES", "configmaps",
			"BRIDGE_NAMESPACES", ns,
			"BRIDGE_CLUSTER_NAME", cluster,
			"BRIDGE_KAFKA_TOPIC_PREFIX", prefix,
			"BRIDGE_KAFKA_LAYOUT", "history",
			"BRIDGE_CHECKPOINT", "file:" + filepath.Join(t.TempDir(), "ckpt.db"),
		}, kv...)...))
	}
	out := filepath.Join(t.TempDir(), "stdout")
	startProc(t, bridgeEnv("east"), out)
	startProc(t, bridgeEnv("west", "KUBECONFIG", westCP.KubeconfigPath()), out)
	poll.Until(t, time.Minute, func() (bool, string) {
		n := len(c.ReadAll(topic))
		return n == 2*objects, fmt.Sprintf("topic holds %d records of %d", n, 2*objects)
	})

	eastInformers := kafkaInformers(c, prefix)
	eastInformers.cluster = "east"
	westInformers := kafkaInformers(c, prefix)
	westInformers.cluster = "west"
	eastLive := startInformer(t, eastInformers, "east-live", ns, "")
	westLive := startInformer(t, westInformers, "west-live", ns, "")

	// east deletes cm-000..cm-009, west cm-005..cm-014: cm-005..cm-009
	// go in both, cm-000..cm-004 in east alone, cm-010..cm-014 in west
	// alone.
	del := func(kc kubernetes.Interface, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := kc.CoreV1().ConfigMaps(ns).Delete(t.Context(), fmt.Sprintf("cm-%03d", i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	del(east, 0, 10)
	del(west, 5, 15)
	const deletes = 20
	var tombstones map[string]int // by ce_cluster
	poll.Until(t, time.Minute, func() (bool, string) {
		tombstones = map[string]int{}
		n := 0
		for _, r := range readTopic(t, c, topic) {
			if r.msg == nil {
				tombstones[r.headers["ce_cluster"]]++
				n++
			}
		}
		return n == deletes, fmt.Sprintf("%d tombstones of %d", n, deletes)
	})
	if tombstones["east"] != 10 || tombstones["west"] != 10 {
		t.Errorf("tombstones by their ce_cluster header: %v; want east 10, west 10", tombstones)
	}

	// A last object in each cluster, created after every tombstone was in
	// the topic: an informer that holds it has read them all.
	create(east, "last")
	create(west, "last")
	for _, x := range []struct {
		i  *busInformer
		kc kubernetes.Interface
	}{{eastLive, east}, {westLive, west}} {
		poll.Until(t, time.Minute, func() (bool, string) {
			_, ok := x.i.cached()[ns+"/last"]
			return ok, x.i.name + " does not hold " + ns + "/last yet"
		})
		if d := diffState(x.i.cached(), listedIn(t, x.kc, ns)); d != "" {
			t.Errorf("informer %s, through the deletes of both clusters, differs from its cluster's LIST: %s", x.i.name, d)
		}
		x.i.checkHandlers(t)
	}

	// Informers started now read the topic from its start.
	for _, x := range []struct {
		ic   informerConfig
		name string
		kc   kubernetes.Interface
	}{{eastInformers, "east-fresh", east}, {westInformers, "west-fresh", west}} {
		i := startInformer(t, x.ic, x.name, ns, "")
		if d := diffState(i.cached(), listedIn(t, x.kc, ns)); d != "" {
			t.Errorf("informer %s, listed from the topic, differs from its cluster's LIST: %s", x.name, d)
		}
		i.checkHandlers(t)
		if s := i.lw.Stats(); s.Foreign == 0 {
			t.Errorf("informer %s: stats %+v, want the other cluster's records counted as foreign", x.name, s)
		}
	}
}
