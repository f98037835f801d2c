package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/eventdata"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Stop the bridge; while it is down update 5 objects, delete 5 and create
// 5. After a restart it publishes exactly those 15 changes, all marked
// snapshot, and nothing about the unchanged objects. It runs on each bus
// with the checkpoint kept in that bus (NATS KV, a Kafka topic), and with
// the file checkpoint. On Kafka each delete is followed by its tombstone,
// and the checkpoint topic describes every live object, one record each
// once compacted.
func TestResumeAfterDowntime(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "resume-"+b.name())
		env := b.env(ns)
		before, want := resumeAfterDowntime(t, b, ns, env)
		if kb, ok := b.(*kafkaBus); ok {
			checkKafkaResume(t, kb, ns, env, before, want)
		}
	})
	// On Kafka, which keeps repeats (JetStream drops a repeat of a message
	// it holds), so that a restart that publishes an unchanged object
	// again fails.
	t.Run("file", func(t *testing.T) {
		b := newKafkaBus(t, busOptions{})
		ns := namespace(t, "resume-file")
		env := b.env(ns)
		env["BRIDGE_CHECKPOINT"] = "file:" + filepath.Join(t.TempDir(), "checkpoint.db")
		resumeAfterDowntime(t, b, ns, env)
	})
}

// resumeAfterDowntime is the restart scenario on b: a bridge configured by
// env publishes 20 new ConfigMaps of ns and stops; while it is down 5 are
// updated, 5 deleted and 5 created; a bridge started again must publish
// exactly those 15 changes. It returns how many events each object had
// after the first run, and the changes made while the bridge was down, by
// object key.
func resumeAfterDowntime(t *testing.T, b bus, ns string, env map[string]string) (map[string]int, map[string]change) {
	t.Helper()
	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)

	r := startBridge(t, env, nil)
	for i := range 20 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := len(b.read(t, ns))
		return n >= 20, fmt.Sprintf("%d of 20 messages", n)
	})
	r.stop(t)
	first := b.read(t, ns)
	if len(first) != 20 {
		t.Fatalf("first run: %d messages, want 20", len(first))
	}
	before := map[string]int{}
	for key, seq := range byKey(first) {
		before[key] = len(seq)
	}

	// While the bridge is down.
	want := map[string]change{}
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
		want[ns+"/"+name] = change{"updated", got.ResourceVersion}
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
		want[ns+"/"+name] = change{"deleted", cm.ResourceVersion}
	}
	for i := 20; i < 25; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[ns+"/"+name] = change{"added", got.ResourceVersion}
	}

	r = startBridge(t, env, nil) // returns once the initial diff is published
	r.stop(t)

	// What the second run published: each object's events past those of
	// the first run.
	var msgs []*wire.Message
	for key, seq := range byKey(b.read(t, ns)) {
		msgs = append(msgs, seq[min(before[key], len(seq)):]...)
	}
	if len(msgs) != 15 {
		t.Errorf("after restart: %d messages, want exactly 15", len(msgs))
	}
	missing := maps.Clone(want)
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
		delete(missing, m.Key())
	}
	for key, w := range missing {
		t.Errorf("missing %s of %s", w.action, key)
	}
	return before, want
}

// sameChange reports whether m is the change (action, rv) that a restart
// should publish. A delete found on restart carries the resourceVersion of
// the list that found the object gone, so for deletes rv is the object's
// last state and m's must be newer; m's object still carries that state.
func sameChange(m *wire.Message, action, rv string) bool {
	if m.Action != action {
		return false
	}
	if action != "deleted" {
		return m.ResourceVersion == rv
	}
	objectRV, err := eventdata.ObjectResourceVersion(m.Data)
	return err == nil && rvLess(rv, m.ResourceVersion) && objectRV == rv
}
