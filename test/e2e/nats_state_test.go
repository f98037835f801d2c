package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// In the state layout (the default), the deletes of ConfigMaps are
// published with BRIDGE_NATS_DELETE_TTL and replace their objects' state;
// once the TTL has passed the stream no longer holds the deleted objects'
// messages, while every live object keeps its latest one, and the stream
// equals the API server's LIST (names, uids, resourceVersions).
func TestNATSStateDeletesExpire(t *testing.T) {
	const objects, deletes, ttl = 30, 12, 2 * time.Second
	srv := natstest.Start(t, natstest.Options{})
	ns := namespace(t, "nats-state")
	nc := srv.Conn(t)
	// Every message the bridge publishes, as it goes by.
	published := make(chan *nats.Msg, 4*objects)
	sub, err := nc.ChanSubscribe(natsStateSubjects(ns), published)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, natsEnv(srv, ns, map[string]string{
		"BRIDGE_NATS_LAYOUT":     string(natssink.LayoutState),
		"BRIDGE_NATS_DELETE_TTL": ttl.String(),
	}), nil)
	defer b.stop(t)

	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	for i := range objects {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			cm.Data["v"] = "1"
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range deletes {
		if err := cms.Delete(ctx, fmt.Sprintf("cm-%02d", 2*i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Each delete went out with the TTL.
	deleted := map[string]time.Time{}
	timeout := time.After(30 * time.Second)
	for len(deleted) < deletes {
		select {
		case m := <-published:
			e, err := wire.NATS.Decode(m.Data, wire.Headers(m.Header))
			if err != nil {
				t.Fatalf("message on %s: %v", m.Subject, err)
			}
			if e.Action == "deleted" {
				if got := m.Header.Get(jetstream.MsgTTLHeader); got != ttl.String() {
					t.Errorf("delete on %s: %s = %q, want %q", m.Subject, jetstream.MsgTTLHeader, got, ttl)
				}
				deleted[m.Subject] = time.Now()
			} else if m.Header.Get(jetstream.MsgTTLHeader) != "" {
				t.Errorf("a change that is not a delete, on %s, has %s", m.Subject, jetstream.MsgTTLHeader)
			}
		case <-timeout:
			t.Fatalf("%d of %d deletes published after 30s", len(deleted), deletes)
		}
	}
	last := slices.MaxFunc(slices.Collect(maps.Values(deleted)), time.Time.Compare)

	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := natsCount(t, nc, "KUBE", natsStateSubjects(ns))
		return n == objects-deletes, fmt.Sprintf("the stream holds %d messages, want %d, one per live object", n, objects-deletes)
	})
	t.Logf("the deleted objects' messages were gone %s after the last delete went by (TTL %s)", time.Since(last).Round(10*time.Millisecond), ttl)
	if d := time.Since(last); d < ttl-500*time.Millisecond {
		t.Errorf("the deletes were gone after %s, before their TTL of %s", d, ttl)
	}
	for subject := range deleted {
		if n := natsCount(t, nc, "KUBE", subject); n != 0 {
			t.Errorf("%s still holds %d messages", subject, n)
		}
	}
	checkStateEqualsList(t, nc, ns)
}

// The state layout keeps every live object's latest message however old
// it is: with BRIDGE_NATS_STREAM_MAX_AGE at 1s, which the state layout
// ignores (and says so), the messages are still there when they are three
// times older; the same setting in the history layout drops them all,
// which shows the test would see a loss.
func TestNATSStateOutlivesMaxAge(t *testing.T) {
	const objects, maxAge = 40, time.Second
	for _, tc := range []struct {
		layout string
		kept   bool
	}{
		{string(natssink.LayoutState), true},
		{string(natssink.LayoutHistory), false},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			srv := natstest.Start(t, natstest.Options{})
			ns := namespace(t, "nats-age")
			nc := srv.Conn(t)
			b := startBridge(t, natsEnv(srv, ns, map[string]string{
				"BRIDGE_NATS_LAYOUT":           tc.layout,
				"BRIDGE_NATS_STREAM_MAX_AGE":   maxAge.String(),
				"BRIDGE_NATS_DUPLICATE_WINDOW": maxAge.String(), // the history layout's limit
			}), nil)
			ctx := t.Context()
			cms := kube(t).CoreV1().ConfigMaps(ns)
			for i := range objects {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			filter := natsLayoutSubjects(tc.layout, ns, []watchedKind{configMaps})[0]
			// The stream's last sequence counts what was stored, even once
			// it has aged out.
			poll.Until(t, 30*time.Second, func() (bool, string) {
				st := natsStreamState(t, nc)
				return st.LastSeq >= objects, fmt.Sprintf("%d of %d messages stored", st.LastSeq, objects)
			})
			b.stop(t)
			if tc.layout == string(natssink.LayoutState) && !strings.Contains(b.logs.String(), "BRIDGE_NATS_STREAM_MAX_AGE is ignored in the state layout") {
				t.Error("the bridge did not warn that the state layout ignores BRIDGE_NATS_STREAM_MAX_AGE")
			}
			// Wait on the server's clock until the newest message is three
			// max ages old.
			poll.Until(t, 30*time.Second, func() (bool, string) {
				st := natsStreamState(t, nc)
				age := natsServerNow(t, nc).Sub(st.LastTime)
				return st.Msgs == 0 || age > 3*maxAge, fmt.Sprintf("newest message %s old", age)
			})
			n := natsCount(t, nc, "KUBE", filter)
			switch {
			case tc.kept && n != objects:
				t.Fatalf("the state stream holds %d messages, want %d: it lost live objects' states to age", n, objects)
			case !tc.kept && n != 0:
				t.Fatalf("the history stream holds %d messages past its max age, want 0", n)
			}
			if tc.kept {
				checkStateEqualsList(t, nc, ns)
			}
		})
	}
}

// checkStateEqualsList fails t unless the state stream holds exactly one
// message for each ConfigMap of ns that the API server lists, with its uid
// and resourceVersion, and nothing else.
func checkStateEqualsList(t *testing.T, nc *nats.Conn, ns string) {
	t.Helper()
	list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*wire.Message{}
	for _, e := range natsFetch(t, nc, "KUBE", jetstream.ConsumerConfig{
		FilterSubject: natsStateSubjects(ns), AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute,
	}, true) {
		if _, dup := got[e.msg.Name]; dup {
			t.Errorf("%s: two messages in a state stream", e.msg.Name)
		}
		got[e.msg.Name] = e.msg
	}
	for _, cm := range list.Items {
		m, ok := got[cm.Name]
		switch {
		case !ok:
			t.Errorf("%s: listed, not in the stream", cm.Name)
		case m.Action == "deleted" || m.UID != string(cm.UID) || m.ResourceVersion != cm.ResourceVersion:
			t.Errorf("%s: the stream holds %s uid %s rv %s, LIST uid %s rv %s", cm.Name, m.Action, m.UID, m.ResourceVersion, cm.UID, cm.ResourceVersion)
		}
		delete(got, cm.Name)
	}
	for name, m := range got {
		t.Errorf("%s: in the stream (%s), not listed", name, m.Action)
	}
	if !t.Failed() {
		t.Logf("the stream equals LIST: %d objects", len(list.Items))
	}
}

// natsStreamState is the state of the stream KUBE: zero when there is
// none.
func natsStreamState(t *testing.T, nc *nats.Conn) jetstream.StreamState {
	t.Helper()
	if info := natsStreamInfo(t, nc); info != nil {
		return info.State
	}
	return jetstream.StreamState{}
}

// natsServerNow is the server's time, as it reports it in the stream's
// info.
func natsServerNow(t *testing.T, nc *nats.Conn) time.Time {
	t.Helper()
	info := natsStreamInfo(t, nc)
	if info == nil {
		t.Fatal("no stream KUBE to ask the server's time")
	}
	return info.TimeStamp
}

// natsStreamInfo is the info of the stream KUBE, nil when there is none.
func natsStreamInfo(t *testing.T, nc *nats.Conn) *jetstream.StreamInfo {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), "KUBE")
	if err != nil {
		return nil
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}
