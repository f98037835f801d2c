package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/poll"
)

// Issue 11, signals: what the bridge does with each signal it may be sent,
// and the exit code it leaves. SIGTERM, SIGINT and SIGHUP stop it
// gracefully; a second one stops it at once; SIGQUIT dumps every
// goroutine's stack and exits with 131, never with 2, the code of a bad
// configuration.

// signalEnv configures a bridge that writes ConfigMaps of ns to stdout,
// with a file checkpoint flushed only on the way out.
func signalEnv(t *testing.T, ns string) []string {
	return []string{
		"BRIDGE_RESOURCES=configmaps",
		"BRIDGE_NAMESPACES=" + ns,
		"BRIDGE_CHECKPOINT=file:" + filepath.Join(t.TempDir(), "checkpoint.db"),
		// No periodic flush comes within the test: what reaches the
		// checkpoint does so through the shutdown's flush.
		"BRIDGE_CHECKPOINT_INTERVAL=1h",
	}
}

// signal sends sig to the bridge.
func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// exited waits up to within for the bridge to exit and returns how it
// ended (the exit code, or the signal that killed it) and its exit code;
// ok is false if it is still running.
func (p *proc) exited(within time.Duration) (how string, code int, ok bool) {
	select {
	case <-p.done:
	case <-time.After(within):
		return "still running", 0, false
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.String(), p.cmd.ProcessState.ExitCode(), true
}

// logCount is how many of the bridge's log lines have a message that
// starts with prefix.
func (p *proc) logCount(prefix string) int {
	n := 0
	for line := range strings.Lines(p.logText()) {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, prefix) {
			n++
		}
	}
	return n
}

// logLine returns the fields of the bridge's first log line whose message
// starts with prefix, or nil.
func (p *proc) logLine(prefix string) map[string]any {
	for line := range strings.Lines(p.logText()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, prefix) {
				return rec
			}
		}
	}
	return nil
}

// SIGHUP stops the bridge as SIGTERM does: it publishes what it holds,
// flushes its checkpoint and exits with 0. A pod is sent SIGHUP only by an
// operator, and dying at once is the worst answer. The checkpoint is
// flushed only on the way out, so a restart that republishes nothing shows
// the flush happened.
func TestSignalHUPStopsGracefully(t *testing.T) {
	ns := namespace(t, "sighup")
	for i := range 20 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"n": "0"}}
		if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env := signalEnv(t, ns)
	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "run1.jsonl"), filepath.Join(dir, "run2.jsonl")

	p := startProc(t, env, out1)
	if n := len(readEvents(t, out1)); n != 20 {
		t.Fatalf("%d events at ready, want 20", n)
	}
	p.signal(t, syscall.SIGHUP)
	sent := time.Now()
	how, code, ok := p.exited(60 * time.Second)
	if !ok {
		t.Fatalf("the bridge did not exit within 60s of SIGHUP:\n%s", p.logText())
	}
	took := time.Since(sent)
	if code != 0 {
		t.Fatalf("after SIGHUP the bridge %s, want exit status 0 after a graceful stop", how)
	}
	stopped := stoppedLine(t, p)
	if p.logLine("stopping gracefully") == nil {
		t.Errorf("no \"stopping gracefully\" line naming the signal in the log:\n%s", p.logText())
	}

	// Started again, it has nothing to publish: the shutdown flushed
	// every position.
	p = startProc(t, env, out2)
	if got := readEvents(t, out2); len(got) != 0 {
		t.Errorf("the restart published %d events, want 0: the stop after SIGHUP did not flush the checkpoint; first: %s", len(got), describeMsg(got[0]))
	}
	if code := p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("SIGHUP: %s %s later; the bridge said %s", how, took.Round(time.Millisecond), stoppedSummary(stopped))
}

// SIGQUIT is what people send for a goroutine dump: the bridge writes the
// stack of every goroutine to stderr and exits with 131 (128 + SIGQUIT, as
// a shell reports a process SIGQUIT killed), not with Go's 2, which is the
// bridge's code for an invalid configuration.
func TestSignalQUITDumpsStacks(t *testing.T) {
	ns := namespace(t, "sigquit")
	p := startProc(t, signalEnv(t, ns), filepath.Join(t.TempDir(), "out.jsonl"))
	p.signal(t, syscall.SIGQUIT)
	how, code, ok := p.exited(30 * time.Second)
	if !ok {
		t.Fatalf("the bridge did not exit within 30s of SIGQUIT:\n%s", p.logText())
	}
	logs := p.logText()
	for _, want := range []string{"\ngoroutine 1 ", "main.main()", "k8s.io/client-go/tools/cache.(*Reflector)"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in stderr after SIGQUIT: not a dump of every goroutine", want)
		}
	}
	if code != 131 {
		t.Errorf("after SIGQUIT the bridge %s, want exit status 131", how)
	}
	t.Logf("SIGQUIT: %s; %d goroutines dumped", how, strings.Count(logs, "\ngoroutine "))
}

// The figures of the stop with a stuck drain.
const (
	secondSignalObjects = 100
	// secondSignalPending is how many changes the bridge must hold,
	// unable to publish them, when it is told to stop.
	secondSignalPending = 100
	secondSignalSeed    = 31
	// secondSignalExit is how soon after the second signal the bridge must
	// have exited.
	secondSignalExit = 15 * time.Second
)

// A second SIGTERM ends a drain stuck on an unavailable bus at once: the
// bridge would otherwise wait out its 5 minute shutdown timeout. It logs
// how many deltas it abandoned, still flushes its checkpoint, and exits
// with 0 within seconds. The abandoned deltas were never checkpointed, so
// the next start, with the bus back, publishes them: the bus's view then
// equals the API server's LIST.
func TestSignalSecondStopsStuckDrain(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		h := holdDuringOutage(t, b, "sig-second-", "5m", secondSignalObjects, secondSignalPending, secondSignalSeed)
		p := h.p

		// The first SIGTERM starts the drain, which cannot end: the bus is
		// down. The bridge goes on retrying meanwhile.
		retries := p.logCount("publish failed; retrying")
		p.signal(t, syscall.SIGTERM)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			n := p.logCount("publish failed; retrying")
			return n > retries+2, fmt.Sprintf("%d retries logged since SIGTERM, want 3: the bridge is not draining", n-retries)
		})
		if how, _, ok := p.exited(0); ok {
			t.Fatalf("the bridge %s after one SIGTERM, with a drain that cannot end and a 5m shutdown timeout", how)
		}
		p.signal(t, syscall.SIGTERM)
		second := time.Now()
		how, code, ok := p.exited(secondSignalExit)
		if !ok {
			t.Fatalf("the bridge did not exit within %s of the second SIGTERM, during a drain stuck on a bus that is down", secondSignalExit)
		}
		took := time.Since(second)
		if code != 0 {
			t.Errorf("after the second SIGTERM the bridge %s, want exit status 0", how)
		}
		logs := p.logText()
		if i, j := strings.Index(logs, `"msg":"draining`), strings.Index(logs, `"msg":"second signal`); i < 0 || j < i {
			t.Errorf("the second SIGTERM did not come during the drain (draining logged at %d, the second signal at %d)", i, j)
		}
		stopped := stoppedLine(t, p)
		hard := p.logLine("hard stop")
		switch {
		case hard == nil:
			t.Errorf("no \"hard stop\" line in the log after the second SIGTERM")
		case hard["abandoned"] != stopped["abandoned"]:
			t.Errorf("the hard stop names %v deltas abandoned, the \"stopped\" line %v", hard["abandoned"], stopped["abandoned"])
		}
		if n, _ := stopped["abandoned"].(float64); n == 0 {
			t.Errorf("nothing abandoned at a hard stop during the outage: %s", stoppedSummary(stopped))
		}
		if strings.Contains(p.logText(), "final flush failed") {
			t.Errorf("the checkpoint's final flush failed at the hard stop")
		}

		// With the bus back, a restart publishes what was abandoned.
		v := h.restartConverges(t)
		t.Logf("%s: %d changes made; %.0f held unpublished at the first SIGTERM; %s %s after the second; first run: %s; after the restart %d events, %d duplicates",
			b.name(), h.made, h.pending, how, took.Round(time.Millisecond), stoppedSummary(stopped), v.events, v.duplicates)
	})
}
