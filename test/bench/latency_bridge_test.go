package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// latencyBridge is the bridge binary running as a child process, as it
// runs in production: configured by environment variables, logging JSON to
// standard error.
type latencyBridge struct {
	cmd   *exec.Cmd
	ready chan struct{} // closed when the bridge logs that it is ready
	done  chan struct{} // closed when its standard error ends

	mu   sync.Mutex
	logs bytes.Buffer
	addr string // where it serves /metrics (and /debug/pprof/ when asked)
}

// latencyBuild builds the commands pkgs into dir.
func latencyBuild(dir string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// startLatencyBridge runs bin with env and waits until it is ready. It is
// killed when b ends.
func startLatencyBridge(b *testing.B, bin string, env map[string]string) *latencyBridge {
	b.Helper()
	p := &latencyBridge{ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BRIDGE_LOG_FORMAT=json"}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go p.readLogs(stderr)
	b.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if b.Failed() {
			b.Logf("bridge logs:\n%s", p.logText())
		}
	})
	select {
	case <-p.ready:
	case <-p.done:
		b.Fatalf("bridge exited before it was ready:\n%s", p.logText())
	case <-time.After(time.Minute):
		b.Fatalf("bridge not ready after a minute:\n%s", p.logText())
	}
	return p
}

func (p *latencyBridge) readLogs(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ready := false
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct{ Msg, Addr string }
		_ = json.Unmarshal(line, &rec)
		p.mu.Lock()
		p.logs.Write(line)
		p.logs.WriteByte('\n')
		if strings.HasPrefix(rec.Msg, "serving /metrics") {
			p.addr = rec.Addr
		}
		p.mu.Unlock()
		if !ready && strings.HasPrefix(rec.Msg, "ready") {
			ready = true
			close(p.ready)
		}
	}
}

func (p *latencyBridge) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// metricsAddr is the address the bridge serves /metrics on.
func (p *latencyBridge) metricsAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// cpuTime is the CPU time the bridge has used so far, or 0 when it cannot
// be read (only Linux tells).
func (p *latencyBridge) cpuTime() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses: utime
	// and stime are the 12th and 13th, in clock ticks of 1/100 s.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// startLatencyObserver runs cmd/observer (bin) with args, and adds the
// arrivals it reports to watch, informer and bus. It returns once both of its
// observers listen, and stops it when b ends.
func startLatencyObserver(b *testing.B, bin string, args []string, kubeconfig string, watch, informer, bus *latencyArrivals) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe() // closed when b ends, which stops it
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
	})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// The times are wall clock readings, without monotonic ones.
			f := strings.Fields(sc.Text())
			var at []int64
			for _, v := range f[min(3, len(f)):] {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					break
				}
				at = append(at, n)
			}
			switch {
			case len(f) == 4 && f[0] == "watch" && len(at) == 1:
				watch.add(latencyKey{f[1], f[2]}, latencyArrival{at: time.Unix(0, at[0])})
			case len(f) == 4 && f[0] == "informer" && len(at) == 1:
				informer.add(latencyKey{f[1], f[2]}, latencyArrival{at: time.Unix(0, at[0])})
			case len(f) == 6 && f[0] == "bus" && len(at) == 3:
				bus.add(latencyKey{f[1], f[2]}, latencyArrival{at: time.Unix(0, at[0]), observed: time.Unix(0, at[1]), stored: time.Unix(0, at[2])})
			default:
				bus.mu.Lock()
				bus.bad++
				bus.mu.Unlock()
			}
		}
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var said strings.Builder
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				continue
			}
			said.WriteString(sc.Text() + "\n")
		}
		ready <- fmt.Errorf("observer ended before it was ready:\n%s", said.String())
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(time.Minute):
		b.Fatal("observer not ready after a minute")
	}
}
