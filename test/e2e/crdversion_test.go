package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// A watched CRD deleted and recreated serving another version: the deletes
// of its objects are published, then the bridge exits 1 naming the
// resource and both versions, and a restart watches the new version.
func TestCRDRecreatedAtAnotherVersion(t *testing.T) {
	const plural, name = "shifters", "shifters.example.com"
	v1 := createCRDAt(t, "example.com", plural, "Shifter", "Namespaced", "v1")
	t.Cleanup(func() { deleteCRD(context.Background(), t, name) })
	ns := namespace(t, "crdver")
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	create := func(gvr schema.GroupVersionResource, objName string) *unstructured.Unstructured {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/" + gvr.Version, "kind": "Shifter",
			"metadata": map[string]any{"name": objName},
		}}
		got, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s %s: %v", gvr.Version, objName, err)
		}
		return got
	}
	old := map[string]string{} // key -> uid
	for _, n := range []string{"a", "b", "c"} {
		old[ns+"/"+n] = string(create(v1, n).GetUID())
	}

	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "run1.jsonl"), filepath.Join(dir, "run2.jsonl")
	env := []string{
		"BRIDGE_RESOURCES=" + name,
		"BRIDGE_NAMESPACES=" + ns,
		"BRIDGE_CHECKPOINT=file:" + filepath.Join(dir, "checkpoint.db"),
		"BRIDGE_CHECKPOINT_INTERVAL=100ms",
	}
	p := startProc(t, env, out1)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := len(readEvents(t, out1))
		return n >= 3, fmt.Sprintf("%d of 3 added events", n)
	})
	addr := p.httpAddr(t)
	served := func() (float64, bool) {
		samples, ok := scrape(addr)
		if !ok || samples["bridge_resource_served"] == nil {
			return -1, false
		}
		return samples.Sum("bridge_resource_served"), true
	}
	if v, ok := served(); !ok || v != 1 {
		t.Errorf("bridge_resource_served %v (scraped: %v), want 1 while v1 is served", v, ok)
	}

	// Deleting the CRD deletes its objects first: the watch reports them.
	deleteCRD(t.Context(), t, name)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		deleted := 0
		for _, m := range readEvents(t, out1) {
			if m.Action == "deleted" && old[m.Key()] == m.UID {
				deleted++
			}
		}
		return deleted == 3, fmt.Sprintf("%d of 3 objects' deletes published after the CRD was deleted", deleted)
	})

	// While the resource is served at no version, the bridge waits (for
	// minutes) rather than exit.
	poll.Until(t, 60*time.Second, func() (bool, string) {
		return servedNowhere(p.logText()), "no warning yet that " + name + " is served at no version"
	})
	select {
	case <-p.done:
		t.Fatalf("bridge exited while %s was served at no version; want it to wait for the CRD to come back", name)
	default:
	}
	if v, ok := served(); !ok || v != 0 {
		t.Errorf("bridge_resource_served %v (scraped: %v), want 0 while the resource is served at no version", v, ok)
	}

	v2 := createCRDAt(t, "example.com", plural, "Shifter", "Namespaced", "v2")
	fresh := map[string]*unstructured.Unstructured{}
	for _, n := range []string{"a", "d"} {
		fresh[ns+"/"+n] = create(v2, n)
	}

	start := time.Now()
	code, exited := waitExit(p, 60*time.Second)
	if !exited {
		t.Fatalf("bridge still running 60s after %s was recreated serving only v2; want exit 1 naming the resource and both versions", name)
	}
	t.Logf("bridge exited %d, %s after the CRD was recreated at v2", code, time.Since(start).Round(100*time.Millisecond))
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	msg := failure(p.logText())
	if !strings.Contains(msg, name) || !strings.Contains(msg, "v1") || !strings.Contains(msg, "v2") {
		t.Errorf("exit error %q does not name %s, v1 and v2", msg, name)
	}
	t.Logf("exit error: %s", msg)
	for _, m := range readEvents(t, out1) {
		if m.APIVersion != "example.com/v1" {
			t.Errorf("first run: %s %s at apiVersion %s, want example.com/v1 only", m.Key(), m.Action, m.APIVersion)
		}
	}

	// The restart resolves v2; the checkpoint (kept by group-resource)
	// makes its first list publish the new objects and nothing else.
	p = startProc(t, env, out2)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		n := len(readEvents(t, out2))
		return n >= 2, fmt.Sprintf("%d of 2 events after the restart", n)
	})
	if code := p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	got := readEvents(t, out2)
	if len(got) != 2 {
		t.Errorf("%d events after the restart, want 2: %s", len(got), describeVersions(got))
	}
	for _, m := range got {
		want, ok := fresh[m.Key()]
		if !ok || m.Action != "added" || m.UID != string(want.GetUID()) || m.ResourceVersion != want.GetResourceVersion() || m.APIVersion != "example.com/v2" {
			t.Errorf("after the restart: %s %s uid=%s rv=%s apiVersion=%s; want only the v2 objects added", m.Key(), m.Action, m.UID, m.ResourceVersion, m.APIVersion)
		}
	}
}

// A watched CRD deleted and recreated at the same version: the bridge
// keeps going and publishes the new objects, however the 404s while the
// CRD was away and discovery's lag fall.
func TestCRDRecreatedAtTheSameVersion(t *testing.T) {
	const plural, name = "returners", "returners.example.com"
	v1 := createCRDAt(t, "example.com", plural, "Returner", "Namespaced", "v1")
	t.Cleanup(func() { deleteCRD(context.Background(), t, name) })
	ns := namespace(t, "crdsame")
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	create := func(objName string) *unstructured.Unstructured {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Returner", "metadata": map[string]any{"name": objName},
		}}
		got, err := dyn.Resource(v1).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", objName, err)
		}
		return got
	}
	before := create("a")

	out := filepath.Join(t.TempDir(), "out.jsonl")
	p := startProc(t, []string{"BRIDGE_RESOURCES=" + name, "BRIDGE_NAMESPACES=" + ns, "BRIDGE_CHECKPOINT=none"}, out)
	deleteCRD(t.Context(), t, name)
	createCRDAt(t, "example.com", plural, "Returner", "Namespaced", "v1")
	after := create("a")

	poll.Until(t, 60*time.Second, func() (bool, string) {
		var deleted, added bool
		for _, m := range readEvents(t, out) {
			deleted = deleted || m.Action == "deleted" && m.UID == string(before.GetUID())
			added = added || m.Action == "added" && m.UID == string(after.GetUID()) && m.ResourceVersion == after.GetResourceVersion()
		}
		return deleted && added, fmt.Sprintf("old object's delete published: %v; new object's add: %v", deleted, added)
	})
	if code := p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0 (the resource is served at v1 again)", code)
	}
}

// deleteCRD deletes the CRD and waits until it is gone, its objects with
// it.
func deleteCRD(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(corpus.CRDResource)
	if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete CRD %s: %v", name, err)
	}
	poll.Until(t, 60*time.Second, func() (bool, string) {
		_, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("CRD %s still there (err %v)", name, err)
	})
}

// waitExit waits up to d for the bridge process to exit on its own and
// returns its exit code. A process still running after d is killed.
func waitExit(p *proc, d time.Duration) (int, bool) {
	waited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(waited) }()
	select {
	case <-waited:
		<-p.done
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-waited
		<-p.done
		return -1, false
	}
}

// servedNowhere reports whether the bridge warned that the resource it
// watches is served at no version.
func servedNowhere(logs string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var rec struct {
			Msg      string
			ServedAt []string
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "resource not served at the version watched") && len(rec.ServedAt) == 0 {
			return true
		}
	}
	return false
}

// failure is the err of the bridge's last "bridge failed" log record.
func failure(logs string) string {
	var msg string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"bridge failed"`) {
			msg = line
		}
	}
	return msg
}

func describeVersions(msgs []*wire.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n  %s %s %s snapshot=%v", m.Action, m.Key(), m.APIVersion, m.Snapshot)
	}
	return b.String()
}
