package nats

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/consumer"
)

// TestResumeAfterNameReusedAndDeleted: an informer holds a ConfigMap and
// stops. While it is away the ConfigMap is deleted, created again (a new
// uid) and deleted again; the state stream keeps only the last delete. The
// list of the restarted ListerWatcher, served from its snapshot and the
// stream, must not hold the first ConfigMap.
func TestResumeAfterNameReusedAndDeleted(t *testing.T) {
	e := newEnv(t, time.Hour, nil)
	opts := consumer.Options{Cluster: "prod", Resource: configmaps.GroupResource(), Name: "reuse",
		SnapshotFile: filepath.Join(t.TempDir(), "snap.db")}
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "10"}, 0)
	e.publish(object{namespace: "a", name: "stays", uid: "u9", rv: "11"}, 0)

	list := func() []string {
		t.Helper()
		l := e.newLog(opts)
		lw, err := consumer.NewListerWatcher(l, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := lw.Close(); err != nil {
				t.Error(err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range obj.(*unstructured.UnstructuredList).Items {
			got = append(got, it.GetName()+"/"+string(it.GetUID()))
		}
		return got
	}
	if got := list(); len(got) != 2 {
		t.Fatalf("first list: %v, want cm and stays", got)
	}
	e.publish(object{namespace: "a", name: "cm", uid: "u1", rv: "12", action: "deleted"}, time.Hour)
	e.publish(object{namespace: "a", name: "cm", uid: "u2", rv: "13"}, 0)
	e.publish(object{namespace: "a", name: "cm", uid: "u2", rv: "14", action: "deleted"}, time.Hour)
	if got := list(); len(got) != 1 || got[0] != "stays/u9" {
		t.Fatalf("list after cm was deleted, recreated and deleted: %v, want [stays/u9]", got)
	}
}
