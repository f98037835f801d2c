package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/sink"
)

// etcdCompact compacts etcd's history up to its current revision, through
// etcd's JSON gateway, and returns that revision.
func etcdCompact(t *testing.T) int64 {
	t.Helper()
	post := func(path string, body any) map[string]any {
		b, _ := json.Marshal(body)
		resp, err := http.Post(cp.EtcdURL()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("etcd %s: %v", path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("etcd %s: status %d, %v", path, resp.StatusCode, err)
		}
		return out
	}
	// Any range answers with the current revision in its header.
	header := post("/v3/kv/range", map[string]any{"key": "AA=="})["header"].(map[string]any)
	var rev int64
	fmt.Sscan(header["revision"].(string), &rev)
	post("/v3/kv/compaction", map[string]any{"revision": fmt.Sprint(rev), "physical": true})
	return rev
}

// The bridge's watch position becomes too old: the process is paused,
// changes are made, etcd is compacted past them and the API server is
// restarted (its watch cache starts again from the present). When the
// bridge resumes, its watch gets 410 Gone and the informer relists. That
// relist publishes exactly what changed while it was paused, deletes
// included, marked snapshot, and nothing about unchanged objects; the log
// says it relisted.
func TestFaultWatchExpiry(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "expiry-"+b.name())
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for i := range 30 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}
			if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		env := map[string]string{"BRIDGE_CHECKPOINT_INTERVAL": "200ms"}
		maps.Copy(env, b.env(ns))
		var environ []string
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		p := startProc(t, environ, filepath.Join(t.TempDir(), "stdout"))
		eventually(t, 30*time.Second, func() (bool, string) {
			v := oracle(t, ns, b.read(t, ns))
			return v.mismatch == "", v.mismatch
		})
		before := map[string]bool{}
		for _, m := range b.read(t, ns) {
			before[m.ID] = true
		}

		// Pause the bridge and cut its watch (a restart of the API server
		// closes it), then change things behind its back: update 5 objects
		// (one of them three times), delete 5, create 5.
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := cp.RestartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{} // name -> action
		for i := range 5 {
			name := fmt.Sprintf("cm-%02d", i)
			times := 1
			if i == 0 {
				times = 3
			}
			for n := range times {
				cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cm.Data["v"] = fmt.Sprint(n + 1)
				if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			want[name] = "updated"
		}
		for i := 5; i < 10; i++ {
			name := fmt.Sprintf("cm-%02d", i)
			if err := cms.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want[name] = "deleted"
		}
		for i := 30; i < 35; i++ {
			name := fmt.Sprintf("cm-%02d", i)
			if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			want[name] = "added"
		}
		// Forget the history: compact etcd. Resume the bridge, and restart
		// the API server under it, so that its watch cache starts from the
		// present and the running bridge sees its connection drop at once.
		rev := etcdCompact(t)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if err := cp.RestartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}

		// A connection the paused process held may look alive until
		// HTTP/2's health check (about 45s) gives up on it.
		resumed := time.Now()
		var v verdict
		eventually(t, 120*time.Second, func() (bool, string) {
			v = oracle(t, ns, b.read(t, ns))
			return v.mismatch == "", v.mismatch
		})
		converged := time.Since(resumed)
		if v.duplicates != 0 || len(v.backwards) != 0 {
			t.Errorf("verdict %+v: want no duplicates and nothing backwards", v)
		}
		var after []*sink.Message
		for _, m := range b.read(t, ns) {
			if !before[m.ID] {
				after = append(after, m)
			}
		}
		for _, m := range after {
			action, ok := want[m.Name]
			switch {
			case !ok:
				t.Errorf("%s %s at %s: the object did not change while the bridge was paused", m.Action, m.Name, m.ResourceVersion)
			case m.Action != action:
				t.Errorf("%s: %s, want %s", m.Name, m.Action, action)
			case !m.Snapshot:
				t.Errorf("%s: %s without snapshot=true, but the relist found it", m.Name, m.Action)
			}
			delete(want, m.Name)
		}
		for name, action := range want {
			t.Errorf("%s: no %s event after the relist", name, action)
		}
		if len(after) != 15 {
			t.Errorf("%d events after the relist, want exactly 15 (5 updated, 5 deleted, 5 added)", len(after))
		}
		if !strings.Contains(p.logText(), "relisted") {
			t.Errorf("the bridge did not log the relist:\n%s", p.logText())
		}
		if code := p.terminate(t); code != 0 {
			t.Errorf("exit code %d after SIGTERM", code)
		}
		t.Logf("%s: etcd compacted at revision %d; caught up %s after resuming; %d events after the relist, all snapshot",
			b.name(), rev, converged.Round(10*time.Millisecond), len(after))
	})
}
