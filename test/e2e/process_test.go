package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/controlplane"
)

// proc is the bridge binary running as a child process, its events going
// to a file.
type proc struct {
	cmd         *exec.Cmd
	readyPrefix string
	ready       chan struct{}
	done        chan struct{}
	mu          sync.Mutex
	logs        bytes.Buffer
}

// startProc runs the bridge with env (plus KUBECONFIG) writing events to
// out, and waits until it logs that it is ready.
func startProc(t *testing.T, env []string, out string) *proc {
	t.Helper()
	return startProcUntil(t, env, out, "ready")
}

// startProcUntil is startProc, waiting for a log message that starts with
// prefix instead.
func startProcUntil(t *testing.T, env []string, out, prefix string) *proc {
	t.Helper()
	p := launchProc(t, env, out, prefix, "")
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("bridge exited before it was ready:\n%s", p.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("bridge not ready after 60s:\n%s", p.logText())
	}
	return p
}

// runToExit runs the bridge with env until it exits, in a directory of its
// own, and returns its exit code and its log. Should it start instead (log
// "ready"), the test fails.
func runToExit(t *testing.T, env []string) (int, string) {
	t.Helper()
	p := launchProc(t, env, filepath.Join(t.TempDir(), "stdout"), "ready", t.TempDir())
	select {
	case <-p.done:
	case <-p.ready:
		t.Fatalf("the bridge started:\n%s", p.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("the bridge did not exit within 60s:\n%s", p.logText())
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode(), p.logText()
}

// launchProc starts the bridge, tied to the test process, with env (after
// KUBECONFIG and the tests' defaults, which env may override) writing
// events to out, in dir ("" for the test's own directory). Its ready
// channel closes when it logs a message that starts with prefix.
func launchProc(t *testing.T, env []string, out, prefix, dir string) *proc {
	t.Helper()
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := &proc{ready: make(chan struct{}), done: make(chan struct{}), readyPrefix: prefix}
	p.cmd = exec.Command(bridgeBin)
	p.cmd.Env = append([]string{"KUBECONFIG=" + cp.KubeconfigPath(), "BRIDGE_LOG_FORMAT=json", "BRIDGE_METRICS_ADDR=127.0.0.1:0", "PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stdout = f
	p.cmd.Dir = dir
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Killed if the test process dies; p.done closes when its stderr does.
	controlplane.StartTiedUntilCleanup(t, p.cmd, p.done)
	go p.watchLogs(stderr)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge logs:\n%s", p.logText())
		}
	})
	return p
}

func (p *proc) watchLogs(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	isReady := false
	for sc.Scan() {
		line := sc.Bytes()
		p.mu.Lock()
		p.logs.Write(line)
		p.logs.WriteByte('\n')
		p.mu.Unlock()
		var rec struct{ Msg string }
		if !isReady && json.Unmarshal(line, &rec) == nil && strings.HasPrefix(rec.Msg, p.readyPrefix) {
			isReady = true
			close(p.ready)
		}
	}
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// kill sends SIGKILL and waits for the process.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	<-p.done
}

// terminate sends SIGTERM and returns the exit code.
func (p *proc) terminate(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(60 * time.Second):
		t.Fatalf("bridge did not exit within 60s of SIGTERM:\n%s", p.logText())
	}
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}
