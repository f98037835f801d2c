package e2e

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Acceptance 2: ConfigMaps and Deployments are created, updated and
// deleted. Each resource's topic holds exactly its objects' events, in
// order, each object in the partition its key hashes to, and every delete
// is followed by a tombstone.
func TestKafkaTopicsPerResource(t *testing.T) {
	ns := namespace(t, "kafka")
	c := kafkatest.Start(t)
	const partitions = 3
	b := startBridge(t, kafkaEnv(c,
		"BRIDGE_RESOURCES", "configmaps,deployments.apps",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CLUSTER_NAME", "e2e",
		"BRIDGE_KAFKA_PARTITIONS", fmt.Sprint(partitions),
	), nil)

	ctx := t.Context()
	kc := kube(t)
	want := map[string]map[string][]change{"kube.configmaps": {}, "kube.deployments.apps": {}}
	cms := kc.CoreV1().ConfigMaps(ns)
	for i := range 10 {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want["kube.configmaps"][ns+"/"+cm.Name] = []change{{"added", cm.ResourceVersion}}
	}
	for i := range 5 {
		cm, err := cms.Get(ctx, fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		key := ns + "/" + cm.Name
		want["kube.configmaps"][key] = append(want["kube.configmaps"][key], change{"updated", cm.ResourceVersion})
	}
	for i := 3; i < 7; i++ {
		name := fmt.Sprintf("cm-%d", i)
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want["kube.configmaps"][ns+"/"+name] = append(want["kube.configmaps"][ns+"/"+name], change{"deleted", ""})
	}

	deps := kc.AppsV1().Deployments(ns)
	for i := range 4 {
		d, err := deps.Create(ctx, deployment(fmt.Sprintf("web-%d", i)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want["kube.deployments.apps"][ns+"/"+d.Name] = []change{{"added", d.ResourceVersion}}
	}
	for i := range 2 {
		d, err := deps.Get(ctx, fmt.Sprintf("web-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = int32Ptr(3)
		if d, err = deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		key := ns + "/" + d.Name
		want["kube.deployments.apps"][key] = append(want["kube.deployments.apps"][key], change{"updated", d.ResourceVersion})
	}
	for i := 1; i < 3; i++ {
		name := fmt.Sprintf("web-%d", i)
		if err := deps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want["kube.deployments.apps"][ns+"/"+name] = append(want["kube.deployments.apps"][ns+"/"+name], change{"deleted", ""})
	}

	// Every event, and a tombstone per delete.
	expected := map[string]int{}
	for topic, objs := range want {
		for _, changes := range objs {
			for _, ch := range changes {
				expected[topic]++
				if ch.action == "deleted" {
					expected[topic]++
				}
			}
		}
	}
	poll.Until(t, 60*time.Second, func() (bool, string) {
		cm, dep := len(c.ReadAll("kube.configmaps")), len(c.ReadAll("kube.deployments.apps"))
		return cm >= expected["kube.configmaps"] && dep >= expected["kube.deployments.apps"],
			fmt.Sprintf("configmaps %d of %d records, deployments %d of %d", cm, expected["kube.configmaps"], dep, expected["kube.deployments.apps"])
	})
	b.stop(t) // anything extra still queued would be published now

	kinds := map[string]string{"kube.configmaps": "ConfigMap", "kube.deployments.apps": "Deployment"}
	for topic, objs := range want {
		recs := readTopic(t, c, topic)
		if len(recs) != expected[topic] {
			t.Errorf("%s: %d records, want exactly %d", topic, len(recs), expected[topic])
		}
		tombstones := 0
		got := recordsByKey(recs)
		if len(got) != len(objs) {
			t.Errorf("%s: records about %d objects, want %d", topic, len(got), len(objs))
		}
		for key, changes := range objs {
			seq := got[key]
			var events []kafkaRecord
			for i, r := range seq {
				if want := int32(wire.PartitionFor([]byte(key), partitions)); r.partition != want {
					t.Errorf("%s %s: record in partition %d, want %d", topic, key, r.partition, want)
				}
				if r.msg == nil {
					tombstones++
					if i == 0 || seq[i-1].msg == nil || seq[i-1].msg.Action != "deleted" {
						t.Errorf("%s %s: tombstone at %d does not follow a delete", topic, key, i)
					}
					continue
				}
				events = append(events, r)
				if r.msg.Action == "deleted" && (i+1 >= len(seq) || seq[i+1].msg != nil) {
					t.Errorf("%s %s: delete at %d is not followed by a tombstone", topic, key, i)
				}
				if r.headers["ce_type"] != r.msg.Type || r.headers["ce_resourceversion"] != r.msg.ResourceVersion {
					t.Errorf("%s %s: headers %v do not match type %s and resourceVersion %s", topic, key, r.headers, r.msg.Type, r.msg.ResourceVersion)
				}
				if r.msg.Kind != kinds[topic] || r.msg.Cluster != "e2e" || r.msg.Key() != key {
					t.Errorf("%s %s: kind %s, cluster %s, subject %s", topic, key, r.msg.Kind, r.msg.Cluster, r.msg.Subject)
				}
			}
			if len(events) != len(changes) {
				t.Errorf("%s %s: %d events, want %d", topic, key, len(events), len(changes))
				continue
			}
			for i, ch := range changes {
				m := events[i].msg
				if m.Action != ch.action || (ch.rv != "" && m.ResourceVersion != ch.rv) {
					t.Errorf("%s %s event %d: %s at %s, want %s at %s", topic, key, i, m.Action, m.ResourceVersion, ch.action, ch.rv)
				}
				if i > 0 && !rvLess(events[i-1].msg.ResourceVersion, m.ResourceVersion) {
					t.Errorf("%s %s: resourceVersion %s after %s", topic, key, m.ResourceVersion, events[i-1].msg.ResourceVersion)
				}
			}
		}
		t.Logf("%s: %d records, %d of them tombstones", topic, len(recs), tombstones)
	}
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: int32Ptr(1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

func int32Ptr(n int32) *int32 { return &n }
