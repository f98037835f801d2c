package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/controlplane"
)

// latencyCPUTime is the CPU time process pid has used so far, or 0 when it
// cannot be read (only Linux tells).
func latencyCPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
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

// latencyObservers are where startLatencyObserver puts what the observer
// reports: the bare watch's, the bare informer's and the bus's arrivals,
// and, with -kafka, the records its Log handed over (records may then be
// nil for a NATS observer, which reports none).
type latencyObservers struct {
	watch, informer, bus, records *latencyArrivals
}

// startLatencyObserver runs cmd/observer (bin) with args, and adds the
// arrivals it reports to obs. It returns once its observers listen, and
// stops it when b ends. It returns the observer's pid.
func startLatencyObserver(b *testing.B, bin string, args []string, kubeconfig string, obs latencyObservers) int {
	watch, informer, bus, records := obs.watch, obs.informer, obs.bus, obs.records
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, done := startStdinTied(b, cmd)
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
			case len(f) == 4 && f[0] == "bus" && len(at) == 1:
				bus.add(latencyKey{f[1], f[2]}, latencyArrival{at: time.Unix(0, at[0])})
			case len(f) == 5 && f[0] == "record" && len(at) == 2 && records != nil:
				records.add(latencyKey{f[1], f[2]}, latencyArrival{at: time.Unix(0, at[0]), observed: time.Unix(0, at[1])})
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
	return cmd.Process.Pid
}

// latencySchedStat is how long a process's threads ran and waited on a
// CPU's run queue while runnable, and how many times they were scheduled
// to run, from /proc/<pid>/task/*/schedstat.
type latencySchedStat struct {
	run, wait time.Duration
	slices    int64
}

// latencySched is process pid's latencySchedStat so far; zero when it
// cannot be read (only Linux tells). Threads that have exited are not
// counted: a Go program keeps its threads.
func latencySched(pid int) latencySchedStat {
	var st latencySchedStat
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		w, err2 := strconv.ParseInt(f[1], 10, 64)
		n, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			st.run += time.Duration(r)
			st.wait += time.Duration(w)
			st.slices += n
		}
	}
	return st
}

// since is what happened between then and s.
func (s latencySchedStat) since(then latencySchedStat) latencySchedStat {
	return latencySchedStat{run: s.run - then.run, wait: s.wait - then.wait, slices: s.slices - then.slices}
}

func (s latencySchedStat) String() string {
	perSlice := time.Duration(0)
	if s.slices > 0 {
		perSlice = s.wait / time.Duration(s.slices)
	}
	return fmt.Sprintf("ran %.2f s and waited %.2f s on a CPU's run queue, %.2f ms on average each of the %d times it was put on a CPU",
		s.run.Seconds(), s.wait.Seconds(), latencyMillis(perSlice), s.slices)
}

// latencyPause is one stop-the-world pause of a garbage collection.
type latencyPause struct {
	at time.Time
	d  time.Duration
}

// latencyGCPauses are the stop-the-world pauses of the garbage
// collections that a child run with GODEBUG=gctrace=1 reported as started
// between from and to. Each line ("gc 12 @3.456s 1%: 0.021+0.54+0.003 ms
// clock, ...") tells when the collection started, after the child did,
// and its three phases: sweep termination and mark termination, the first
// and the third, stop the world.
func latencyGCPauses(c *child, from, to time.Time) []latencyPause {
	c.mu.Lock()
	logs := c.logs.String()
	c.mu.Unlock()
	var out []latencyPause
	for line := range strings.Lines(logs) {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "gc" || !strings.HasPrefix(f[2], "@") || f[5] != "ms" {
			continue
		}
		since, err := time.ParseDuration(strings.TrimPrefix(f[2], "@"))
		if err != nil {
			continue
		}
		at := c.started.Add(since)
		if at.Before(from) || at.After(to) {
			continue
		}
		var phases []time.Duration
		for v := range strings.SplitSeq(f[4], "+") {
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil {
				break
			}
			phases = append(phases, time.Duration(ms*float64(time.Millisecond)))
		}
		if len(phases) != 3 {
			continue
		}
		out = append(out,
			latencyPause{at: at, d: phases[0]},
			latencyPause{at: at.Add(phases[0] + phases[1]), d: phases[2]})
	}
	return out
}

// startLatencyNATS runs cmd/natsserver (bin), with its JetStream store in
// a temporary directory of b, and returns its client URL once it is
// ready. It stops when b ends.
func startLatencyNATS(b *testing.B, bin string) string {
	b.Helper()
	cmd := exec.Command(bin, "-store", b.TempDir())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	said := &latencyOutput{}
	cmd.Stderr = said
	stdout, done := startStdinTied(b, cmd)
	url := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			url <- sc.Text()
		}
		close(url)
		for sc.Scan() {
		}
	}()
	select {
	case u, ok := <-url:
		if !ok || !strings.HasPrefix(u, "nats://") {
			b.Fatalf("the NATS server did not start (it said %q):\n%s", u, said.String())
		}
		return u
	case <-time.After(time.Minute):
		b.Fatal("the NATS server was not ready after a minute")
		return ""
	}
}

// latencyOutput keeps a process's output, to be read while it writes.
type latencyOutput struct {
	mu  sync.Mutex
	out strings.Builder
}

func (o *latencyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out.Write(p)
}

func (o *latencyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out.String()
}

// startStdinTied starts cmd, a process that runs until its stdin closes,
// tied to this one (controlplane.StartTied), and returns its stdout and a
// channel the caller closes once it has read stdout to its end. When b
// ends, cmd's stdin is closed, and cmd is killed if its stdout has not
// ended 10 s later.
func startStdinTied(b *testing.B, cmd *exec.Cmd) (io.ReadCloser, chan struct{}) {
	b.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	if err := controlplane.StartTied(cmd, done); err != nil {
		b.Fatal(err)
	}
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
	return stdout, done
}
