package crash_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubebus/bridge/internal/crash"
	"github.com/kubebus/bridge/test/controlplane"
)

// childCase names the case a child process runs; the parent sets it.
const childCase = "BRIDGE_CRASH_TEST_CASE"

// panics are the ways a goroutine of the bridge can panic where a handler
// catches it: where each panics, and the function its stack must show.
var panics = []struct {
	where string
	run   func()
	fn    string
}{
	// client-go's loops run under HandleCrash.
	{"a client-go loop", func() { go wait.Until(panicInLoop, time.Millisecond, make(chan struct{})) }, "crash_test.panicInLoop"},
	// The bridge's own goroutines defer HandleCrash at their top.
	{"a goroutine of the bridge", func() {
		go func() {
			defer utilruntime.HandleCrash()
			panicInGoroutine()
		}()
	}, "crash_test.panicInGoroutine"},
}

func panicInLoop()      { panic("boom in a client-go loop") }
func panicInGoroutine() { panic("boom in a goroutine of the bridge") }

// A panic caught by a handler ends the process with exit code 1 (a
// runtime failure), not Go's 2 (the bridge's code for an invalid
// configuration), after logging the panic and the stack it came from. Each
// case runs in a child process: the test binary run again.
func TestPanicExitsWithCode1(t *testing.T) {
	if where := os.Getenv(childCase); where != "" {
		crash.Install(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
		for _, p := range panics {
			if p.where == where {
				p.run()
			}
		}
		select {} // until the panic ends the process
	}
	for _, p := range panics {
		t.Run(p.where, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPanicExitsWithCode1$")
			cmd.Env = append(os.Environ(), childCase+"="+p.where)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			exited := make(chan struct{})
			if err := controlplane.StartTied(cmd, exited); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			close(exited)
			if code := cmd.ProcessState.ExitCode(); code != crash.ExitCode {
				t.Errorf("a panic in %s: %s, want exit status %d\n%s", p.where, cmd.ProcessState, crash.ExitCode, &stderr)
			}
			var rec struct{ Msg, Panic, Stack string }
			for line := range strings.Lines(stderr.String()) {
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Panic != "" {
					break
				}
			}
			if !strings.HasPrefix(rec.Panic, "boom") || !strings.Contains(rec.Stack, p.fn) {
				t.Errorf("no log line with the panic and a stack through %s:\n%s", p.fn, &stderr)
			}
		})
	}
}
