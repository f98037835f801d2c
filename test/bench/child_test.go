package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/metricstest"
)

// buildBinary builds the main package pkg (an import path) into dir, the
// way `make build` builds the bridge, and returns the binary's path.
func buildBinary(pkg, dir string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// child is a program under measurement, running as a child process that
// logs JSON lines ({"msg": ..., "addr": ...}) to standard error, as the
// bridge and the bareinformer command do.
type child struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}

	mu      sync.Mutex
	logs    bytes.Buffer
	seen    map[string]logLine // first line of each message
	lines   []logLine          // every line with a message, in order
	addr    string             // of /metrics, from the "serving" line
	changed chan struct{}      // closed and replaced on every new line
}

// startChild runs bin with exactly env (nothing is inherited, so that no
// GOGC or GOMEMLIMIT of the benchmark's environment reaches it). The
// child is killed if it outlives the benchmark.
func startChild(b *testing.B, name, bin string, env []string, args ...string) *child {
	b.Helper()
	c := &child{name: name, done: make(chan struct{}), seen: map[string]logLine{}, changed: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.started = time.Now()
	// Killed if the benchmark process dies; done closes when its stderr
	// does.
	controlplane.StartTiedUntilCleanup(b, c.cmd, c.done)
	go c.readLogs(stderr)
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("last logs of %s:\n%s", c.name, c.tail(40))
		}
	})
	return c
}

func (c *child) readLogs(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		now := time.Now()
		var rec struct{ Msg, Addr string }
		_ = json.Unmarshal(sc.Bytes(), &rec)
		c.mu.Lock()
		c.logs.Write(sc.Bytes())
		c.logs.WriteByte('\n')
		if rec.Msg != "" {
			line := logLine{At: now, Raw: bytes.Clone(sc.Bytes()), Msg: rec.Msg}
			if _, ok := c.seen[rec.Msg]; !ok {
				c.seen[rec.Msg] = line
			}
			c.lines = append(c.lines, line)
		}
		if c.addr == "" && rec.Addr != "" && strings.HasPrefix(rec.Msg, "serving") {
			c.addr = rec.Addr
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

// logLine is a line a child logged, and when the benchmark read it.
type logLine struct {
	At  time.Time
	Raw []byte
	Msg string
}

// waitLog waits until the child logs a message starting with prefix and
// returns the first such line. It fails the benchmark if the child exits
// first or timeout passes.
func (c *child) waitLog(b *testing.B, prefix string, timeout time.Duration) logLine {
	b.Helper()
	return c.waitFor(b, fmt.Sprintf("%q", prefix), timeout, func() (logLine, bool) {
		for msg, line := range c.seen {
			if strings.HasPrefix(msg, prefix) {
				return line, true
			}
		}
		return logLine{}, false
	})
}

// waitFor waits until find, called with c.mu held, finds a line, and
// returns it. It fails the benchmark, saying what it waited for, if the
// child exits first or timeout passes.
func (c *child) waitFor(b *testing.B, what string, timeout time.Duration, find func() (logLine, bool)) logLine {
	b.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		line, ok := find()
		changed := c.changed
		c.mu.Unlock()
		if ok {
			return line
		}
		select {
		case <-changed:
		case <-c.done:
			b.Fatalf("%s exited before logging %s:\n%s", c.name, what, c.tail(40))
		case <-deadline:
			b.Fatalf("%s did not log %s within %s:\n%s", c.name, what, timeout, c.tail(40))
		}
	}
}

// logged returns the first line the child logged with the message msg.
func (c *child) logged(msg string) (logLine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	line, ok := c.seen[msg]
	return line, ok
}

// waitLogN waits until the child has logged n messages starting with
// prefix and returns the nth (counted from 1). It fails the benchmark if
// the child exits first or timeout passes.
func (c *child) waitLogN(b *testing.B, prefix string, n int, timeout time.Duration) logLine {
	b.Helper()
	return c.waitFor(b, fmt.Sprintf("%q %d times", prefix, n), timeout, func() (logLine, bool) {
		seen := 0
		for _, line := range c.lines {
			if strings.HasPrefix(line.Msg, prefix) {
				if seen++; seen == n {
					return line, true
				}
			}
		}
		return logLine{}, false
	})
}

// metricsAddr is the address the child serves /metrics on.
func (c *child) metricsAddr(b *testing.B) string {
	b.Helper()
	c.waitLog(b, "serving", time.Minute)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(b *testing.B) {
	b.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- c.cmd.Wait() }()
	select {
	case err := <-waited:
		<-c.done
		if err != nil {
			b.Fatalf("%s did not stop cleanly: %v\n%s", c.name, err, c.tail(40))
		}
	case <-time.After(2 * time.Minute):
		b.Fatalf("%s did not exit within 2m of SIGTERM:\n%s", c.name, c.tail(40))
	}
}

// tail returns the last n lines the child logged.
func (c *child) tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := strings.SplitAfter(c.logs.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// memory is one reading of a process's memory, in bytes.
type memory struct {
	// HeapInuse is go_memstats_heap_inuse_bytes right after a forced GC:
	// the live heap plus the free space inside the spans it occupies.
	HeapInuse float64
	// RSS is process_resident_memory_bytes (VmRSS); RSSAnon and RSSFile
	// split it into anonymous memory and mapped files (the binary, and the
	// bridge's bbolt checkpoint).
	RSS, RSSAnon, RSSFile float64
}

// asSeen is a process's memory as a user sees it, with no forced GC: its
// peak resident set since it started (VmHWM) and its resident set now
// (VmRSS).
type asSeen struct{ Peak, RSS float64 }

// seenAfter waits d (the process is left alone: no scrape, no GC), then
// reads c's VmHWM and VmRSS from /proc.
func seenAfter(b *testing.B, c *child, d time.Duration) asSeen {
	b.Helper()
	time.Sleep(d)
	st := procStatus(c.cmd.Process.Pid)
	m := asSeen{Peak: st["VmHWM"], RSS: st["VmRSS"]}
	if m.Peak == 0 || m.RSS == 0 {
		b.Fatalf("%s: /proc/%d/status lacks VmHWM or VmRSS", c.name, c.cmd.Process.Pid)
	}
	return m
}

// measureMemory reads c's memory n times, a second apart, each time right
// after forcing a garbage collection (GET /debug/pprof/heap?gc=1), and
// returns the minimum of each quantity. The minimum, because what the
// readings add to a quiet process only pushes them up: garbage from the
// scrapes, and freed pages the runtime has not yet returned to the system.
func measureMemory(b *testing.B, c *child, n int) memory {
	b.Helper()
	addr := c.metricsAddr(b)
	var low memory
	var readings []string
	for i := range n {
		if i > 0 {
			time.Sleep(time.Second)
		}
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
		if err != nil {
			b.Fatalf("%s: heap profile: %v", c.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: heap profile: %s", c.name, resp.Status)
		}
		samples, err := metricstest.Scrape(addr)
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		m := memory{HeapInuse: samples.Sum("go_memstats_heap_inuse_bytes"), RSS: samples.Sum("process_resident_memory_bytes")}
		if m.HeapInuse == 0 || m.RSS == 0 {
			b.Fatalf("%s: /metrics lacks go_memstats_heap_inuse_bytes or process_resident_memory_bytes", c.name)
		}
		status := procStatus(c.cmd.Process.Pid)
		m.RSSAnon, m.RSSFile = status["RssAnon"], status["RssFile"]
		readings = append(readings, fmt.Sprintf("%.1f/%.1f", mib(m.HeapInuse), mib(m.RSS)))
		if i == 0 {
			low = m
			continue
		}
		low = memory{min(low.HeapInuse, m.HeapInuse), min(low.RSS, m.RSS), min(low.RSSAnon, m.RSSAnon), min(low.RSSFile, m.RSSFile)}
	}
	if testing.Verbose() {
		b.Logf("%s: heap in use / RSS readings, MiB: %s", c.name, strings.Join(readings, ", "))
	}
	return low
}

// procStatus reads the memory fields of /proc/<pid>/status, in bytes.
func procStatus(pid int) map[string]float64 {
	out := map[string]float64{}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[k] = n * 1024
		}
	}
	return out
}

// mib converts bytes to MiB.
func mib(n float64) float64 { return n / (1 << 20) }
