package source

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/internal/crash"
)

// sourceCrashCase names the case a child process runs; the parent sets it.
const sourceCrashCase = "BRIDGE_SOURCE_CRASH_CASE"

// panickingObserver panics when told of a watch error or of a resource's
// served state, which it is from the watchdog's goroutine and a served
// check's.
type panickingObserver struct{ noObserver }

func (panickingObserver) WatchError(Resource)   { panic("boom in the watchdog") }
func (panickingObserver) Served(Resource, bool) { panic("boom in a served check") }

// The goroutines the source starts itself, each made to panic.
var sourcePanics = map[string]func(){
	"a watch observer": func() {
		w := watch.NewRaceFreeFake()
		w.Add(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}})
		observe(w, func(watch.Event) bool { panic("boom in a watch observer") }, func(bool) {})
	},
	"the watchdog": func() {
		// A watch that never delivers is cut, and the cut counted.
		src := New(&scriptedAPI{mode: stuck}, Options{Resources: []Resource{configmaps}, Observer: panickingObserver{},
			StallTimeout: 100 * time.Millisecond}, emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.NewTextHandler(io.Discard, nil)))
		go func() { _ = src.Run(context.Background()) }()
	},
	"a served check": func() {
		src := New(nil, Options{Resources: []Resource{widgets}, Observer: panickingObserver{}, Discovery: newDiscoveryAt("v1")},
			emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.NewTextHandler(io.Discard, nil)))
		src.startServedChecks(context.Background(), func(error) {}, &sync.WaitGroup{})
	},
}

// Issue 11: every goroutine the source starts has the bridge's crash
// handler, so that a panic in one exits with 1, as internal/crash
// promises, and not with Go's 2, the bridge's code for an invalid
// configuration. Each case runs in a child process: the test binary run
// again.
func TestSourceGoroutinesExitWithCode1OnPanic(t *testing.T) {
	if where := os.Getenv(sourceCrashCase); where != "" {
		crash.Install(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
		sourcePanics[where]()
		time.Sleep(time.Minute) // until the panic ends the process
		os.Exit(0)
	}
	for where := range sourcePanics {
		t.Run(where, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSourceGoroutinesExitWithCode1OnPanic$")
			cmd.Env = append(os.Environ(), sourceCrashCase+"="+where)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			_ = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != crash.ExitCode {
				t.Errorf("a panic in %s: %s, want exit status %d\n%s", where, cmd.ProcessState, crash.ExitCode, lastLines(stderr.String(), 5))
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := bytes.Split([]byte(s), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}
