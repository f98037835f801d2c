package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/sink"
)

// Stop the bridge; while it is down update 5 objects, delete 5 and create
// 5. After a restart it publishes exactly those 15 changes, all marked
// snapshot, and nothing about the unchanged objects.
func TestResumeAfterDowntime(t *testing.T) {
	ns := namespace(t, "resume")
	env := map[string]string{
		"BRIDGE_RESOURCES":  "configmaps",
		"BRIDGE_NAMESPACES": ns,
		"BRIDGE_CHECKPOINT": "file:" + filepath.Join(t.TempDir(), "checkpoint.db"),
	}
	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)

	first := &memSink{}
	b := startBridge(t, env, first)
	for i := range 20 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		return first.len() >= 20, fmt.Sprintf("%d of 20 messages", first.len())
	})
	b.stop(t)

	// While the bridge is down.
	want := map[string]struct{ action, rv string }{}
	for i := range 5 {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[ns+"/"+name] = struct{ action, rv string }{"updated", got.ResourceVersion}
	}
	for i := 5; i < 10; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// A delete found on restart carries the resourceVersion of the list
		// that found the object gone: newer than its last published state.
		want[ns+"/"+name] = struct{ action, rv string }{"deleted", cm.ResourceVersion}
	}
	for i := 20; i < 25; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[ns+"/"+name] = struct{ action, rv string }{"added", got.ResourceVersion}
	}

	second := &memSink{}
	b = startBridge(t, env, second) // returns once the initial diff is published
	b.stop(t)

	msgs := second.all()
	if len(msgs) != 15 {
		t.Errorf("after restart: %d messages, want exactly 15", len(msgs))
	}
	for _, m := range msgs {
		w, ok := want[m.Key()]
		switch {
		case !ok:
			t.Errorf("unexpected %s of unchanged %s at %s", m.Action, m.Key(), m.ResourceVersion)
		case !sameChange(m, w.action, w.rv):
			t.Errorf("%s: %s at %s, want %s at %s", m.Key(), m.Action, m.ResourceVersion, w.action, w.rv)
		}
		if !m.Snapshot {
			t.Errorf("%s: snapshot=false, want true", m.Key())
		}
		if m.UID == "" || m.Name == "" || m.Namespace != ns {
			t.Errorf("%s: identity uid=%q namespace=%q name=%q", m.Key(), m.UID, m.Namespace, m.Name)
		}
		delete(want, m.Key())
	}
	for key, w := range want {
		t.Errorf("missing %s of %s", w.action, key)
	}
}

// sameChange reports whether m is the change (action, rv) that a restart
// should publish. A delete found on restart carries the resourceVersion of
// the list that found the object gone, so for deletes rv is the object's
// last state and m's must be newer; m's object still carries that state.
func sameChange(m *sink.Message, action, rv string) bool {
	if m.Action != action {
		return false
	}
	if action != "deleted" {
		return m.ResourceVersion == rv
	}
	var data struct {
		Object struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(m.Data, &data); err != nil {
		return false
	}
	return rvLess(rv, m.ResourceVersion) && data.Object.Metadata.ResourceVersion == rv
}
