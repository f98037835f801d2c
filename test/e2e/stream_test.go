package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

type change struct {
	action string
	rv     string // "" for deletes: the API server does not return it
}

// 50 ConfigMaps in 2 namespaces, 20 updated, 10 deleted: the sink gets
// exactly those 80 deltas, with the API server's resourceVersions, in order
// per object.
func TestEveryChangeExactlyOnce(t *testing.T) {
	nsA, nsB := namespace(t, "stream"), namespace(t, "stream")
	other := namespace(t, "stream-other") // not watched
	s := &sinktest.Recorder{}
	b := startBridge(t, map[string]string{
		"BRIDGE_RESOURCES":    "configmaps",
		"BRIDGE_NAMESPACES":   nsA + "," + nsB,
		"BRIDGE_CLUSTER_NAME": "e2e",
	}, s)

	ctx := t.Context()
	cms := kube(t).CoreV1()
	want := map[string][]change{}
	for _, ns := range []string{nsA, nsB, other} {
		for i := range 25 {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i), Namespace: ns},
				Data:       map[string]string{"v": "0"},
			}
			got, err := cms.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ns != other {
				want[ns+"/"+cm.Name] = append(want[ns+"/"+cm.Name], change{"added", got.ResourceVersion})
			}
		}
	}
	for _, ns := range []string{nsA, nsB} {
		for i := range 10 {
			name := fmt.Sprintf("cm-%02d", i)
			cm, err := cms.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["v"] = "1"
			got, err := cms.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want[ns+"/"+name] = append(want[ns+"/"+name], change{"updated", got.ResourceVersion})
		}
		for i := 5; i < 10; i++ {
			name := fmt.Sprintf("cm-%02d", i)
			if err := cms.ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want[ns+"/"+name] = append(want[ns+"/"+name], change{"deleted", ""})
		}
	}

	poll.Until(t, 30*time.Second, func() (bool, string) {
		return s.Len() >= 80, fmt.Sprintf("%d of 80 messages", s.Len())
	})
	// A graceful stop publishes everything still queued: any extra
	// message would show up now.
	b.stop(t)

	msgs := s.Accepted()
	if len(msgs) != 80 {
		t.Errorf("got %d messages, want exactly 80", len(msgs))
	}
	got := byKey(msgs)
	if len(got) != len(want) {
		t.Errorf("messages about %d objects, want %d", len(got), len(want))
	}
	for key, changes := range want {
		seq := got[key]
		if len(seq) != len(changes) {
			t.Errorf("%s: %d messages, want %d", key, len(seq), len(changes))
			continue
		}
		for i, c := range changes {
			m := seq[i]
			if m.Action != c.action {
				t.Errorf("%s message %d: %s, want %s", key, i, m.Action, c.action)
			}
			if c.rv != "" && m.ResourceVersion != c.rv {
				t.Errorf("%s message %d: resourceVersion %s, want %s (the API server's)", key, i, m.ResourceVersion, c.rv)
			}
			if i > 0 && !rvLess(seq[i-1].ResourceVersion, m.ResourceVersion) {
				t.Errorf("%s: resourceVersion %s after %s: out of order", key, m.ResourceVersion, seq[i-1].ResourceVersion)
			}
			if m.Snapshot {
				t.Errorf("%s message %d: snapshot=true for a watched change", key, i)
			}
			if data := decodeData(t, m); data.OldObject != nil || data.Object == nil || data.Object.GetManagedFields() != nil ||
				data.Object.GetResourceVersion() != m.ResourceVersion {
				t.Errorf("%s message %d: data has oldObject=%v managedFields=%v object rv=%s; want the object alone, without managedFields",
					key, i, data.OldObject != nil, data.Object.GetManagedFields() != nil, data.Object.GetResourceVersion())
			}
			if m.Cluster != "e2e" || m.Kind != "ConfigMap" || m.APIVersion != "v1" || m.Resource.String() != "/v1, Resource=configmaps" {
				t.Errorf("%s: attributes cluster=%q kind=%q apiversion=%q resource=%v", key, m.Cluster, m.Kind, m.APIVersion, m.Resource)
			}
		}
	}
}

type eventData struct {
	Object    *unstructured.Unstructured `json:"object"`
	OldObject *unstructured.Unstructured `json:"oldObject"`
}

func decodeData(t *testing.T, m *wire.Message) eventData {
	t.Helper()
	var d eventData
	if err := json.Unmarshal(m.Data, &d); err != nil {
		t.Fatalf("%s: data: %v", m.ID, err)
	}
	return d
}

// With BRIDGE_KEEP_MANAGED_FIELDS and BRIDGE_OLD_OBJECT, objects keep
// metadata.managedFields and updates carry the previous state.
func TestManagedFieldsAndOldObject(t *testing.T) {
	ns := namespace(t, "options")
	s := &sinktest.Recorder{}
	b := startBridge(t, map[string]string{
		"BRIDGE_RESOURCES":           "configmaps",
		"BRIDGE_NAMESPACES":          ns,
		"BRIDGE_KEEP_MANAGED_FIELDS": "true",
		"BRIDGE_OLD_OBJECT":          "true",
	}, s)
	cms := kube(t).CoreV1().ConfigMaps(ns)
	created, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Data["v"] = "1"
	updated, err := cms.Update(t.Context(), created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) { return s.Len() >= 2, fmt.Sprintf("%d of 2 messages", s.Len()) })
	b.stop(t)

	msgs := s.Accepted()
	if len(msgs) != 2 || msgs[0].Action != "added" || msgs[1].Action != "updated" {
		t.Fatalf("got %d messages, want added then updated", len(msgs))
	}
	added, upd := decodeData(t, msgs[0]), decodeData(t, msgs[1])
	if added.OldObject != nil {
		t.Error("added event has an oldObject")
	}
	if upd.Object.GetResourceVersion() != updated.ResourceVersion || upd.OldObject == nil || upd.OldObject.GetResourceVersion() != created.ResourceVersion {
		t.Errorf("updated event: object at %s, oldObject %v; want object at %s and oldObject at %s",
			upd.Object.GetResourceVersion(), upd.OldObject, updated.ResourceVersion, created.ResourceVersion)
	}
	if len(upd.Object.GetManagedFields()) == 0 || len(added.Object.GetManagedFields()) == 0 {
		t.Error("managedFields dropped although BRIDGE_KEEP_MANAGED_FIELDS=true")
	}
}
