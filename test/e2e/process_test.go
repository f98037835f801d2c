package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
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
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := &proc{ready: make(chan struct{}), done: make(chan struct{}), readyPrefix: prefix}
	p.cmd = exec.Command(bridgeBin)
	p.cmd.Env = append([]string{"KUBECONFIG=" + cp.KubeconfigPath(), "BRIDGE_LOG_FORMAT=json", "BRIDGE_METRICS_ADDR=127.0.0.1:0", "PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stdout = f
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Killed if the test process dies; p.done closes when its stderr does.
	if err := controlplane.StartTied(p.cmd, p.done); err != nil {
		t.Fatal(err)
	}
	go p.watchLogs(stderr)
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("bridge logs:\n%s", p.logText())
		}
	})
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("bridge exited before it was ready:\n%s", p.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("bridge not ready after 60s:\n%s", p.logText())
	}
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
