package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// TestDriftRepairedWhileRunning: drift injected into the bus while the
// bridge runs is repaired by its next scheduled comparison, and counted.
// Four objects are made wrong on the bus behind the bridge's back: one's
// message removed (on Kafka, a tombstone written by hand), one's replaced
// by a delete written by hand, one's by an older state, and one object the
// cluster never had is written. The bus's state must come back to a LIST:
// two objects missing and one stale published again, the ghost deleted.
func TestDriftRepairedWhileRunning(t *testing.T) {
	forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
		ns := namespace(t, "drift-"+b.name())
		env := stateEnv(b, ns)
		env["BRIDGE_RECONCILE_INTERVAL"] = "2s"
		m := metrics.New()
		r := startBridgeWith(t, env, bridge.WithMetrics(m))
		defer r.stop(t)
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for i := range 6 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}
			if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		poll.Until(t, 30*time.Second, func() (bool, string) { return sameAsList(t, ns, b.read(t, ns)) })
		// A clean pass first: nothing repaired.
		poll.Until(t, 30*time.Second, func() (bool, string) {
			runs := seriesOf(t, m, "bridge_reconcile_runs_total", "result")["ok"]
			return runs >= 1, fmt.Sprintf("%v reconcile passes", runs)
		})
		if got := seriesOf(t, m, "bridge_reconcile_repaired_total", "kind"); len(got) != 0 {
			t.Fatalf("a pass over a bus that agrees repaired %v", got)
		}

		byName := map[string]*wire.Message{}
		for _, msg := range b.read(t, ns) {
			byName[msg.Name] = msg
		}
		ghost := *byName["cm-0"]
		ghost.Name, ghost.Subject, ghost.UID, ghost.ID = "ghost", ns+"/ghost", "00000000-0000-4000-8000-000000000001", "drift-ghost"
		stale := *byName["cm-3"]
		stale.ResourceVersion, stale.ID = "1", "drift-stale"
		deleted := *byName["cm-2"]
		deleted.Action, deleted.Type, deleted.ID = "deleted", deleted.Type[:len(deleted.Type)-len("added")]+"deleted", "drift-delete"
		ghost.Encoded, stale.Encoded, deleted.Encoded = nil, nil, nil
		switch b := b.(type) {
		case *natsBus:
			js := b.srv.JetStream(t)
			stream, err := js.Stream(t.Context(), "KUBE")
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Purge(t.Context(), jetstream.WithPurgeSubject(natsStateSubject(ns, "cm-1"))); err != nil {
				t.Fatal(err)
			}
			natsWrite(t, js, ns, &deleted, true)
			natsWrite(t, js, ns, &stale, false)
			natsWrite(t, js, ns, &ghost, false)
		case *kafkaBus:
			topic := "kube-" + ns + ".configmaps"
			cl := b.c.Client()
			defer cl.Close()
			recs := []*kgo.Record{{Topic: topic, Key: []byte(ns + "/cm-1")}, kafkaEvent(t, topic, &deleted), kafkaEvent(t, topic, &stale), kafkaEvent(t, topic, &ghost)}
			if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if ok, _ := sameAsList(t, ns, b.read(t, ns)); ok {
			t.Fatal("the drift written by hand left the bus equal to the cluster")
		}

		poll.Until(t, 30*time.Second, func() (bool, string) { return sameAsList(t, ns, b.read(t, ns)) })
		poll.Until(t, 10*time.Second, func() (bool, string) {
			got := seriesOf(t, m, "bridge_reconcile_repaired_total", "kind")
			return got["ghost"] == 1 && got["missing"] == 2 && got["stale"] == 1,
				fmt.Sprintf("repaired %v, want 1 ghost, 2 missing, 1 stale", got)
		})
		reconciled := 0
		for _, msg := range b.read(t, ns) {
			if msg.Reason == "reconciled" {
				reconciled++
			}
		}
		if reconciled != 4 {
			t.Errorf("%d latest events marked reconciled, want the 4 repairs", reconciled)
		}
	})
}

// natsStateSubject is the state layout's subject of ConfigMap name in ns.
func natsStateSubject(ns, name string) string {
	return "kube.e2e." + wire.CoreGroupToken + ".configmaps." + wire.EscapeToken(ns) + "." + wire.EscapeToken(name)
}

// natsWrite stores m in the stream behind the bridge's back, as a
// structured event; a delete with the delete TTL, as the bridge writes one.
func natsWrite(t *testing.T, js jetstream.JetStream, ns string, m *wire.Message, isDelete bool) {
	t.Helper()
	body, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: natsStateSubject(ns, m.Name), Data: body, Header: nats.Header{}}
	msg.Header.Set(wire.NATSMsgIDHeader, m.ID)
	msg.Header.Set(wire.NATSContentTypeHeader, wire.StructuredContentType)
	msg.Header.Set("ce-uid", m.UID)
	msg.Header.Set("ce-resourceversion", m.ResourceVersion)
	if isDelete {
		msg.Header.Set(jetstream.MsgTTLHeader, "1h")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

// kafkaEvent is the record of m, structured, as the bridge writes one.
func kafkaEvent(t *testing.T, topic string, m *wire.Message) *kgo.Record {
	t.Helper()
	body, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(m.Subject), Value: body, Headers: []kgo.RecordHeader{
		{Key: "content-type", Value: []byte("application/cloudevents+json; charset=UTF-8")},
		{Key: "ce_id", Value: []byte(m.ID)},
		{Key: "ce_type", Value: []byte(m.Type)},
		{Key: "ce_resourceversion", Value: []byte(m.ResourceVersion)},
		{Key: "ce_uid", Value: []byte(m.UID)},
	}}
}
