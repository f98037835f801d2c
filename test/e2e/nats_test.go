package e2e

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// ConfigMaps created, updated and deleted reach a JetStream stream: a
// durable consumer reads exactly those changes, in order per object, each
// on its object's subject (dots in names escaped) with its event id as
// Nats-Msg-Id.
func TestNATSConfigMapStream(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	ns := namespace(t, "nats")
	b := startBridge(t, natsEnv(srv, ns, nil), nil)

	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	names := []string{"plain", "app.config.v1", "ip-10-0-1-5.ec2.internal", "a-b"}
	want := map[string][]change{}
	for _, name := range names {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[name] = append(want[name], change{"added", cm.ResourceVersion})
	}
	for _, name := range names[:3] {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name] = append(want[name], change{"updated", cm.ResourceVersion})
	}
	for _, name := range names[1:3] {
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name] = append(want[name], change{"deleted", ""})
	}
	total := 0
	for _, c := range want {
		total += len(c)
	}

	nc := srv.Conn(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := natsCount(t, nc, "KUBE", natsSubjects(ns))
		return n >= uint64(total), fmt.Sprintf("%d of %d messages in the stream", n, total)
	})
	b.stop(t) // a graceful stop publishes anything still queued: extras would show

	events := natsConsume(t, nc, "KUBE", jetstream.ConsumerConfig{
		Durable:       "e2e-reader",
		FilterSubject: natsSubjects(ns),
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if len(events) != total {
		t.Errorf("consumer read %d messages, want exactly %d", len(events), total)
	}
	got := natsByName(events)
	for _, name := range names {
		subject := "kube.e2e.core.v1.configmaps." + ns + "." + map[string]string{
			"plain": "plain", "app.config.v1": "app_config_v1", "ip-10-0-1-5.ec2.internal": "ip-10-0-1-5_ec2_internal", "a-b": "a-b",
		}[name]
		seq := got[name]
		if len(seq) != len(want[name]) {
			t.Errorf("%s: %d messages, want %d", name, len(seq), len(want[name]))
			continue
		}
		for i, c := range want[name] {
			e := seq[i]
			if e.msg.Action != c.action || (c.rv != "" && e.msg.ResourceVersion != c.rv) {
				t.Errorf("%s message %d: %s at %s, want %s at %s", name, i, e.msg.Action, e.msg.ResourceVersion, c.action, c.rv)
			}
			if e.subject != subject {
				t.Errorf("%s message %d: subject %s, want %s", name, i, e.subject, subject)
			}
			if e.msgID != e.msg.ID || e.msg.ID == "" {
				t.Errorf("%s message %d: Nats-Msg-Id %q, event id %q", name, i, e.msgID, e.msg.ID)
			}
			if e.msg.Namespace != ns || e.msg.Cluster != "e2e" || e.msg.Snapshot {
				t.Errorf("%s message %d: namespace %q cluster %q snapshot %v", name, i, e.msg.Namespace, e.msg.Cluster, e.msg.Snapshot)
			}
		}
	}
}

// The NATS server stops in the middle of a stream of changes and comes
// back with its files: the bridge, never restarted, reconnects and the
// stream ends up with every change exactly once, in order per object.
func TestNATSServerRestartMidStream(t *testing.T) {
	const objects = 30
	srv := natstest.Start(t, natstest.Options{})
	ns := namespace(t, "nats-restart")
	b := startBridge(t, natsEnv(srv, ns, map[string]string{
		"BRIDGE_CHECKPOINT":              "nats-kv:e2e-restart",
		"BRIDGE_RETRY_MAX_INTERVAL":      "500ms",
		"BRIDGE_NATS_RECONNECT_MAX_WAIT": "500ms",
	}), nil)
	nc := srv.Conn(t)
	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)

	var (
		mu   sync.Mutex
		want = map[string][]change{}
		made atomic.Int64
	)
	record := func(name, action, rv string) {
		mu.Lock()
		want[name] = append(want[name], change{action, rv})
		mu.Unlock()
		made.Add(1)
	}
	for i := range objects {
		name := fmt.Sprintf("cm-%02d", i)
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		record(name, "added", cm.ResourceVersion)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := natsCount(t, nc, "KUBE", natsSubjects(ns))
		return n >= objects, fmt.Sprintf("%d of %d messages before the restart", n, objects)
	})

	// Two rounds of updates and a few deletes, made while the server
	// goes down and comes back.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for round := 1; round <= 2; round++ {
			for i := range objects {
				name := fmt.Sprintf("cm-%02d", i)
				cm, err := cms.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				cm.Data["v"] = fmt.Sprint(round)
				if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
					return
				}
				record(name, "updated", cm.ResourceVersion)
			}
		}
		for i := range 5 {
			name := fmt.Sprintf("cm-%02d", i)
			if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			record(name, "deleted", "")
		}
	}()

	poll.Until(t, 30*time.Second, func() (bool, string) {
		return made.Load() >= objects+10, fmt.Sprintf("%d changes made", made.Load())
	})
	stored := natsCount(t, nc, "KUBE", natsSubjects(ns))
	if err := b.b.Readiness(); err != nil {
		t.Fatalf("not ready before the outage: %v", err)
	}
	srv.Shutdown()
	before := made.Load()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return b.b.Readiness() != nil, "still ready with the NATS server down"
	})
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return made.Load() >= before+30, fmt.Sprintf("%d changes made while the server is down", made.Load()-before)
	})
	srv.Start()
	back := time.Now()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		err := b.b.Readiness()
		return err == nil, fmt.Sprintf("not ready after the server came back: %v", err)
	})
	<-done
	if t.Failed() {
		t.FailNow()
	}
	total := int(made.Load())
	var firstAfter time.Duration
	poll.Until(t, 60*time.Second, func() (bool, string) {
		n := natsCount(t, nc, "KUBE", natsSubjects(ns))
		if firstAfter == 0 && n > stored {
			firstAfter = time.Since(back)
		}
		return n >= uint64(total), fmt.Sprintf("%d of %d messages in the stream", n, total)
	})
	t.Logf("%d of %d changes made after the server stopped; first new message stored %s after it came back, all %d %s after",
		total-int(before), total, firstAfter.Round(time.Millisecond), total, time.Since(back).Round(time.Millisecond))
	b.stop(t)

	events := natsRead(t, nc, "KUBE", natsSubjects(ns), 0)
	if len(events) != total {
		t.Errorf("stream holds %d messages, want exactly %d: lost or repeated changes", len(events), total)
	}
	got := natsByName(events)
	for name, changes := range want {
		seq := got[name]
		if len(seq) != len(changes) {
			t.Errorf("%s: %d messages, want %d", name, len(seq), len(changes))
			continue
		}
		for i, c := range changes {
			if seq[i].msg.Action != c.action || (c.rv != "" && seq[i].msg.ResourceVersion != c.rv) {
				t.Errorf("%s message %d: %s at %s, want %s at %s", name, i, seq[i].msg.Action, seq[i].msg.ResourceVersion, c.action, c.rv)
			}
		}
	}
}

// natsByName groups events by the name of their object, each group in
// the order read.
func natsByName(events []natsEvent) map[string][]natsEvent {
	out := map[string][]natsEvent{}
	for _, e := range events {
		out[e.msg.Name] = append(out[e.msg.Name], e)
	}
	return out
}
