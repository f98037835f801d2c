package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// clusterRoleSubjects is the subject filter of every ClusterRole, as the
// default layout makes them for cluster e2e.
const clusterRoleSubjects = "kube.e2e.rbac_authorization_k8s_io.v1.clusterroles._.*"

// ClusterRoles whose names are far past the NATS server's 4 KiB control
// line and bbolt's 32 KiB keys, up to the longest the API server takes,
// are published among the others, with the checkpoint in NATS KV and in a
// file: every ClusterRole arrives at its current state, each on the
// subject EscapeToken gives for its name; the connection never drops and
// the bridge stays ready; the checkpoint holds the whole names; a restart
// publishes nothing again; and both runs stop cleanly.
func TestNATSLongObjectNames(t *testing.T) {
	for _, kind := range []string{"nats-kv", "file"} {
		t.Run(kind, func(t *testing.T) { testNATSLongObjectNames(t, kind) })
	}
}

func testNATSLongObjectNames(t *testing.T, ckpt string) {
	// Room for the events of the longest names, which carry the name three
	// times: the payload limit is not what this test is about.
	srv := natstest.Start(t, natstest.Options{MaxPayload: 8 << 20})
	nc := srv.Conn(t)
	bucket := fmt.Sprintf("e2e-long-%d", nsCounter.Add(1))
	file := filepath.Join(t.TempDir(), "checkpoint.db")
	env := srv.Env()
	maps.Copy(env, map[string]string{
		"BRIDGE_SINK":         "nats",
		"BRIDGE_RESOURCES":    "clusterroles.rbac.authorization.k8s.io",
		"BRIDGE_CLUSTER_NAME": "e2e",
		"BRIDGE_CHECKPOINT":   "nats-kv:" + bucket,
		// Every change of an object is read, with the version in subjects.
		"BRIDGE_NATS_LAYOUT": "history",
	})
	if ckpt == "file" {
		env["BRIDGE_CHECKPOINT"] = "file:" + file
	}
	prefix := fmt.Sprintf("e2e-long-%d-", nsCounter.Add(1))
	roles := kube(t).RbacV1().ClusterRoles()
	ctx := t.Context()

	// Before the start, for the initial list: normal names, one just past
	// the control line, one of several thousand bytes, one near the most
	// the API server takes, and one to delete while the bridge runs.
	for i := range 5 {
		createClusterRole(t, fmt.Sprintf("%snormal-%d", prefix, i))
	}
	createClusterRole(t, longName(prefix+"control-line-", 4097))
	updated := createClusterRole(t, longName(prefix+"thousands-", 9000))
	createClusterRole(t, longName(prefix+"near-max-", apiMaxNameLen-64))
	doomed := createClusterRole(t, longName(prefix+"deleted-", 20_000))

	r := startBridge(t, env, nil)
	ready := watchReadiness(r.b)

	// While it runs: new ones, an update and a delete of long ones.
	createClusterRole(t, fmt.Sprintf("%snormal-late", prefix))
	createClusterRole(t, longName(prefix+"late-max-", apiMaxNameLen))
	updated.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	if _, err := roles.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the ClusterRole of %d bytes: %.300v", len(updated.Name), err)
	}
	if err := roles.Delete(ctx, doomed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Every ClusterRole the API server lists arrives at its current
	// resourceVersion, on the subject of its name; the deleted one's last
	// event is its delete.
	var events []natsEvent
	poll.Until(t, 90*time.Second, func() (bool, string) {
		events = natsFetch(t, nc, "KUBE", jetstream.ConsumerConfig{
			FilterSubject: clusterRoleSubjects, AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute,
		}, false) // the stream may still be growing
		last := map[string]natsEvent{}
		for _, e := range events {
			last[e.msg.Name] = e
		}
		list, err := roles.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cr := range list.Items {
			e, ok := last[cr.Name]
			if !ok || e.msg.ResourceVersion != cr.ResourceVersion {
				return false, fmt.Sprintf("%d events; ClusterRole %s at %s not there yet", len(events), shortName(cr.Name), cr.ResourceVersion)
			}
		}
		if e, ok := last[doomed.Name]; !ok || e.msg.Action != "deleted" {
			return false, fmt.Sprintf("no delete of %s yet", shortName(doomed.Name))
		}
		return true, ""
	})
	long := 0
	for _, e := range events {
		if want := clusterRoleSubjects[:len(clusterRoleSubjects)-1] + wire.EscapeToken(e.msg.Name); e.subject != want {
			t.Errorf("%s %s on %.120q..., want %.120q...", e.msg.Action, shortName(e.msg.Name), e.subject, want)
		}
		if len(e.subject) > wire.MaxSubjectLen {
			t.Errorf("subject of %d bytes", len(e.subject))
		}
		if len(e.msg.Name) > wire.MaxTokenLen {
			long++
		}
	}
	t.Logf("%d events of ClusterRoles, %d of names past %d bytes", len(events), long, wire.MaxTokenLen)
	if long < 6 { // 4 long ones added, 1 updated, 1 deleted
		t.Errorf("%d events of long names, want at least 6", long)
	}
	if flips := ready.stop(); len(flips) != 1 || flips[0].err != nil {
		t.Errorf("readiness changed while running: %s", flips)
	}
	logs := r.logs.String()
	for _, bad := range []string{"nats: disconnected", "nats: reconnected", "control line", "connection closed"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the bridge logged %q while running", bad)
		}
	}
	r.stop(t) // fails the test unless Run returns nil

	// The checkpoint holds every ClusterRole under its whole name.
	var store checkpoint.Store
	var err error
	if ckpt == "file" {
		store, err = checkpoint.OpenFile(file)
	} else {
		store, err = natskv.Open(ctx, nc, bucket, natskv.Options{}, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	snap, err := store.Load(ctx, "clusterroles.rbac.authorization.k8s.io")
	store.Close()
	if err != nil {
		t.Fatalf("load the checkpoint: %.300v", err)
	}
	list, err := roles.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range list.Items {
		if p, ok := snap.Objects[cr.Name]; !ok || p.ResourceVersion != cr.ResourceVersion {
			t.Errorf("checkpoint of ClusterRole %s: %+v, want rv %s", shortName(cr.Name), p, cr.ResourceVersion)
		}
	}
	if _, ok := snap.Objects[doomed.Name]; ok {
		t.Errorf("the checkpoint still holds the deleted %s", shortName(doomed.Name))
	}

	// A restart finds every object in the checkpoint: nothing is published
	// again.
	// Only the objects' subjects count: the cluster's discovery document
	// (kube._discovery.e2e) is published once the first run has read its
	// CRDs, which a run stopped as soon as it is ready may not have done.
	before := natstest.StreamState(t, nc, "KUBE").LastSeq
	r = startBridge(t, env, nil) // returns once the initial comparison is published
	r.stop(t)
	if again := natsRead(t, nc, "KUBE", "kube.e2e.>", before); len(again) > 0 {
		for _, e := range again {
			t.Logf("published again: %s %s at %s", e.msg.Action, shortName(e.msg.Name), e.msg.ResourceVersion)
		}
		t.Errorf("the restart published %d messages, want none", len(again))
	}
}
