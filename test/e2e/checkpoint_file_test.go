package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/poll"
)

// damagedCheckpoint writes a checkpoint file for dir of the kind named:
// "empty" is 0 bytes; "corrupt" is a real checkpoint of 2,000 objects
// with random bytes over every page but the two meta pages.
func damagedCheckpoint(t *testing.T, dir, kind string) string {
	t.Helper()
	path := filepath.Join(dir, "checkpoint.db")
	if kind == "empty" {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	store, err := checkpoint.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var records []checkpoint.Record
	for i := range 2000 {
		records = append(records, checkpoint.Record{Resource: "configmaps", Key: fmt.Sprintf("gone/cm-%04d", i),
			Position: checkpoint.Position{UID: fmt.Sprintf("uid-%04d", i), ResourceVersion: fmt.Sprint(100 + i)}})
	}
	if err := store.Commit(t.Context(), records); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	rng := rand.New(rand.NewPCG(11, 11))
	for i := 2 * page; i < len(data); i++ {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A checkpoint file that is empty, or has random bytes over its pages,
// stops the bridge with exit code 1 (a runtime failure, not the 2 of a bad
// configuration) and a message that names the file, what is wrong with it
// and the setting that allows a fresh start. The file is left as it was.
func TestDamagedCheckpointFileRefused(t *testing.T) {
	for _, kind := range []string{"corrupt", "empty"} {
		t.Run(kind, func(t *testing.T) {
			ns := namespace(t, "cp-"+kind)
			path := damagedCheckpoint(t, t.TempDir(), kind)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			code, logs := runToExit(t, []string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_NAMESPACES=" + ns, "BRIDGE_CHECKPOINT=file:" + path})
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			for _, want := range []string{path, "checkpoint file is " + kind, "BRIDGE_CHECKPOINT_FRESH_START"} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log does not mention %q", want)
				}
			}
			for _, bad := range []string{"panic", "goroutine "} {
				if strings.Contains(logs, bad) {
					t.Errorf("the log mentions %q", bad)
				}
			}
			if after, err := os.ReadFile(path); err != nil || string(after) != string(before) {
				t.Errorf("the file was changed (%d bytes before, %d after, %v)", len(before), len(after), err)
			}
			if t.Failed() {
				t.Logf("bridge log:\n%s", logs)
			}
		})
	}
}

// With BRIDGE_CHECKPOINT_FRESH_START=true, an empty or corrupt checkpoint
// file is moved aside, kept as it was; the bridge warns, counts it in
// bridge_checkpoint_fresh_starts_total, and starts afresh, publishing
// every object.
func TestDamagedCheckpointFileFreshStart(t *testing.T) {
	for _, kind := range []string{"corrupt", "empty"} {
		t.Run(kind, func(t *testing.T) {
			ns := namespace(t, "cp-fresh-"+kind)
			for i := range 3 {
				_, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(),
					&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			path := damagedCheckpoint(t, dir, kind)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "events.jsonl")
			p := startProc(t, []string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_NAMESPACES=" + ns, "BRIDGE_CHECKPOINT=file:" + path,
				"BRIDGE_CHECKPOINT_FRESH_START=true", "BRIDGE_CHECKPOINT_INTERVAL=100ms"}, out)

			// The warning names the file, where it went and why.
			var warning struct {
				Level, Msg, Path, MovedTo, Reason string
			}
			for line := range strings.Lines(p.logText()) {
				if strings.Contains(line, "moved aside") {
					if err := json.Unmarshal([]byte(line), &warning); err != nil {
						t.Fatal(err)
					}
				}
			}
			if warning.Level != "WARN" || warning.Path != path || warning.Reason != kind || !strings.HasPrefix(warning.MovedTo, path+".unreadable-") {
				t.Fatalf("warning %+v, want level WARN, path %s, reason %s and where the file went", warning, path, kind)
			}
			if aside, err := os.ReadFile(warning.MovedTo); err != nil || string(aside) != string(before) {
				t.Errorf("the file set aside: %d bytes, %v; want it as it was (%d bytes)", len(aside), err, len(before))
			}

			// Counted on /metrics.
			addr := p.httpAddr(t)
			samples, ok := scrape(addr)
			if !ok {
				t.Fatal("no /metrics")
			}
			var count float64 = -1
			for _, m := range samples["bridge_checkpoint_fresh_starts_total"].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == kind {
						count = m.GetCounter().GetValue()
					}
				}
			}
			if count != 1 {
				t.Errorf("bridge_checkpoint_fresh_starts_total{reason=%q} = %v, want 1", kind, count)
			}

			// Every object is published, and the new checkpoint records them.
			poll.Until(t, 30*time.Second, func() (bool, string) {
				return sameAsList(t, ns, readEvents(t, out))
			})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(ctx,
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, 30*time.Second, func() (bool, string) {
				return sameAsList(t, ns, readEvents(t, out))
			})
			if code := p.terminate(t); code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0", code)
			}
			store, err := checkpoint.OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			snap, err := store.Load(t.Context(), "configmaps")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Objects) != 4 {
				t.Errorf("the new checkpoint holds %d objects, want the 4 of the namespace: %v", len(snap.Objects), snap.Objects)
			}
		})
	}
}

// A checkpoint file damaged while the bridge runs (every page but the two
// meta pages overwritten) makes the next flush fail inside bbolt; no retry
// can fix that, so the bridge stops at once, exit code 1, with an error
// naming the file, instead of retrying the flush forever while every new
// object waits. The next start refuses the file.
func TestDamagedCheckpointFileWhileRunning(t *testing.T) {
	ns := namespace(t, "cp-broken")
	for i := range 3 {
		if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.db")
	env := []string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_NAMESPACES=" + ns, "BRIDGE_CHECKPOINT=file:" + path, "BRIDGE_CHECKPOINT_INTERVAL=100ms"}
	p := startProc(t, env, filepath.Join(dir, "events.jsonl"))
	// Once the initial state is checkpointed, nothing writes the file
	// until the next change.
	addr := p.httpAddr(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		samples, ok := scrape(addr)
		if !ok {
			return false, "no /metrics"
		}
		lag, last := -1.0, 0.0
		for _, m := range samples["bridge_checkpoint_lag"].GetMetric() {
			lag = m.GetGauge().GetValue()
		}
		for _, m := range samples["bridge_checkpoint_last_flush_timestamp_seconds"].GetMetric() {
			last = m.GetGauge().GetValue()
		}
		return lag == 0 && last > 0, fmt.Sprintf("checkpoint lag %v, last flush %v", lag, last)
	})

	// Behind bbolt's back, through a descriptor of our own: bbolt reads the
	// file's pages through a shared mapping, so it sees the damage.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte(strings.Repeat("\xff", int(fi.Size())-2*page)), int64(2*page)); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	// A new object: its intent must be flushed before it is published.
	if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the bridge still runs 30s after its checkpoint file was damaged")
	}
	_ = p.cmd.Wait()
	logs := p.logText()
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	for _, want := range []string{path, "checkpoint file is corrupt"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not mention %q", want)
		}
	}
	for _, bad := range []string{"goroutine ", "will retry"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the log mentions %q", bad)
		}
	}

	code, logs := runToExit(t, env)
	if code != 1 || !strings.Contains(logs, "checkpoint file is corrupt") || !strings.Contains(logs, path) {
		t.Errorf("the next start: exit code %d, want 1 and an error naming the corrupt file:\n%s", code, logs)
	}
}
