package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// churn creates, updates and deletes ConfigMaps cm-00..cm-(n-1) in ns, at
// random, until ctx ends. It returns how many changes it made.
func churn(ctx context.Context, t *testing.T, ns string, n int, seed uint64) int {
	cms := kube(t).CoreV1().ConfigMaps(ns)
	rng := rand.New(rand.NewPCG(seed, seed))
	made := 0
	for ctx.Err() == nil {
		name := fmt.Sprintf("cm-%02d", rng.IntN(n))
		var err error
		switch op := rng.IntN(10); {
		case op < 2:
			err = cms.Delete(ctx, name, metav1.DeleteOptions{})
		default:
			var cm *corev1.ConfigMap
			cm, err = cms.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
			} else if err == nil {
				cm.Data = map[string]string{"n": fmt.Sprint(made)}
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
		}
		switch {
		case err == nil:
			made++
		case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), ctx.Err() != nil:
		default:
			t.Errorf("churn: %v", err)
			return made
		}
	}
	return made
}

// SIGKILL the bridge mid-stream, restart it: every object's final state
// is in the output, and the only repeats are deltas published after the
// last checkpoint flush.
func TestCrashRecovery(t *testing.T) {
	ns := namespace(t, "crash")
	dir := t.TempDir()
	cpPath := filepath.Join(dir, "checkpoint.db")
	out1, out2 := filepath.Join(dir, "run1.jsonl"), filepath.Join(dir, "run2.jsonl")
	env := []string{
		"BRIDGE_RESOURCES=configmaps",
		"BRIDGE_NAMESPACES=" + ns,
		"BRIDGE_CHECKPOINT=file:" + cpPath,
		// Long enough that the kill lands between flushes.
		"BRIDGE_CHECKPOINT_INTERVAL=700ms",
	}

	p := startProc(t, env, out1)
	churnCtx, stopChurn := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var changes int
	wg.Go(func() { changes = churn(churnCtx, t, ns, 40, 1) })

	poll.Until(t, 60*time.Second, func() (bool, string) {
		n := len(readEvents(t, out1))
		return n >= 300, fmt.Sprintf("%d of 300 events before the kill", n)
	})
	p.kill(t)
	run1 := readEvents(t, out1)

	// What the checkpoint held when the process died.
	store, err := checkpoint.OpenFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := store.Load(t.Context(), "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	p = startProc(t, env, out2)
	poll.Until(t, 60*time.Second, func() (bool, string) {
		n := len(readEvents(t, out2))
		return n >= 100, fmt.Sprintf("%d of 100 events after the restart", n)
	})
	stopChurn()
	wg.Wait()

	// The stream converges on the API server's state.
	poll.Until(t, 60*time.Second, func() (bool, string) {
		return sameAsList(t, ns, append(readEvents(t, out1), readEvents(t, out2)...))
	})
	if code := p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}

	// Repeats: an id published before the crash and again after it. Each
	// must be a delta the checkpoint had not recorded.
	covered := func(m *wire.Message) bool {
		pos, ok := snap.Objects[m.Key()]
		// An intent covers no delivered state.
		return ok && pos.UID == m.UID && !pos.IsIntent() && !rvLess(pos.ResourceVersion, m.ResourceVersion)
	}
	seen := map[string]bool{}
	unflushed := 0
	for _, m := range run1 {
		seen[m.ID] = true
		if !covered(m) {
			unflushed++
		}
	}
	dups := 0
	for _, m := range readEvents(t, out2) {
		if !seen[m.ID] {
			continue
		}
		dups++
		if covered(m) {
			t.Errorf("%s %s at %s was checkpointed before the crash but published again", m.Key(), m.Action, m.ResourceVersion)
		}
	}
	if dups > unflushed {
		t.Errorf("%d repeats, more than the %d deltas published after the last checkpoint flush", dups, unflushed)
	}
	t.Logf("%d changes; %d events before the kill, %d of them after the last checkpoint flush; %d repeated after restart",
		changes, len(run1), unflushed, dups)
}

// sameAsList replays msgs into a view (the latest state per key; deletes
// remove keys) and compares it with a LIST of the namespace's ConfigMaps.
func sameAsList(t *testing.T, ns string, msgs []*wire.Message) (bool, string) {
	view := map[string]string{}
	for _, m := range msgs {
		if m.Action == "deleted" {
			delete(view, m.Key())
		} else {
			view[m.Key()] = m.ResourceVersion
		}
	}
	list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	if len(list.Items) != len(view) {
		return false, fmt.Sprintf("view has %d objects, the API server %d", len(view), len(list.Items))
	}
	for _, cm := range list.Items {
		key := ns + "/" + cm.Name
		if view[key] != cm.ResourceVersion {
			return false, fmt.Sprintf("%s: view at %q, API server at %s", key, view[key], cm.ResourceVersion)
		}
	}
	return true, ""
}
