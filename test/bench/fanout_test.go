package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/natstest"
)

// The fan-out scenario's shape.
const (
	// fanoutObjects ConfigMaps of about 2 KiB, in fanoutNamespaces.
	fanoutObjects    = 10_000
	fanoutNamespaces = 5
	// fanoutSettle is how long the API server is left alone after its
	// restart before a run begins: long enough for the work it does right
	// after it reports ready to die down.
	fanoutSettle = 5 * time.Second
	// fanoutAfter is how long after the last informer synced the API
	// server's memory is read, at the earliest.
	fanoutAfter = 3 * time.Second
	// fanoutSyncTimeout bounds a run's wait for its informers.
	fanoutSyncTimeout = 5 * time.Minute
)

// fanoutCounts are the numbers of informers, the largest first: its run
// sets the length of the window every run of its mode is measured over.
var fanoutCounts = []int{50, 10, 1}

// The runs through the bus with the fewest and the most informers, whose
// API-server CPU growth the scenario holds to fanoutCPUTarget, are measured
// in fanoutRounds rounds, then one more round at a time, up to
// fanoutMaxRounds, while the growth is unclear: its rounds disagree on the
// target. Each round runs both, alternating which goes first. The runs
// with the counts between, and the direct runs, are measured once.
const (
	fanoutRounds    = 3
	fanoutMaxRounds = 5
)

// The targets of the fan-out growths, on the bridge's own growth.
var (
	fanoutCPUTarget    = AtMost(1.05)
	fanoutMemoryTarget = AtMost(1.1)
)

// BenchmarkFanOut measures what N client-go informers on one resource
// (10,000 ConfigMaps of about 2 KiB) cost the API server, for N = 1, 10
// and 50, once when they read the bridge's NATS JetStream stream (state
// layout) through consumer/nats, and once when they list and watch the API
// server directly (the baseline). The informers of a run are N shared
// informers in one child process (cmd/fanout), each with its own
// connection; their CPU and memory are not the API server's.
//
// Each run starts from a freshly restarted kube-apiserver (etcd and its
// data stay), so that its memory high-water mark (VmHWM) is the run's own
// and no run inherits another's caches or garbage. Measured per run: the
// API server's CPU time (utime+stime of /proc/<pid>/stat) over the run's
// window, its VmHWM and its VmRSS at the window's end (at least three
// seconds after the last informer synced), and each informer's time from
// its process's start until its cache synced.
//
// Through the bus, a run's window includes the bridge's own start: it
// restarts on its checkpoint, lists and watches the ConfigMaps (the one
// list and watch the API server serves for every consumer), and the
// informers start once it reports the initial state published. Counting
// it makes the figure the API server's whole cost of serving N consumers
// through the bus, rather than only what the consumers add (nothing), and
// keeps the N=1 figure comparable to one direct informer's list and
// watch. The bridge published every object once before the runs; the
// informers' sync times count from their start, so they measure reading
// the state from the bus.
//
// An idle API server still uses some CPU, and a run whose informers take
// longer to sync would count more of it. So every run of a mode is
// measured over the same window, the length of its first N=50 run (which
// runs first); a shorter run waits out the window, idle, before it is
// read.
//
// The API server's CPU over a run through the bus is about a second, which
// the noise of a shared machine moves by a tenth or more; so the bus runs
// with 1 and with 50 informers are repeated in rounds (see fanoutRounds)
// and the growth's figure shows its spread across them.
func BenchmarkFanOut(b *testing.B) {
	setup := startProcessSetup(b, "github.com/kubebus/bridge/test/bench/cmd/fanout")
	ctx, cp, kc, dir := b.Context(), setup.cp, setup.kc, setup.dir
	namespaces := namespaceNames("fanout", fanoutNamespaces)
	bus := natstest.Start(b, natstest.Options{})
	t0 := time.Now()
	if _, err := createConfigMaps(ctx, kc, namespaces, fanoutObjects, writers); err != nil {
		b.Fatal(err)
	}
	if testing.Verbose() {
		b.Logf("wrote %d ConfigMaps in %s", fanoutObjects, time.Since(t0).Round(time.Millisecond))
	}
	bridgeBin, programs := setup.binaries(b)

	const cluster = "bench"
	f := &fanout{
		b: b, cp: cp, kc: kc, namespaces: namespaces, bin: programs[0], bridgeBin: bridgeBin,
		kubeEnv: []string{"KUBECONFIG=" + cp.KubeconfigPath()},
		bridgeEnv: append([]string{
			"KUBECONFIG=" + cp.KubeconfigPath(),
			"BRIDGE_RESOURCES=configmaps",
			"BRIDGE_SINK=nats",
			"BRIDGE_NATS_LAYOUT=state",
			"BRIDGE_CHECKPOINT=file:" + filepath.Join(dir, "checkpoint.db"),
			"BRIDGE_CLUSTER_NAME=" + cluster,
			"BRIDGE_METRICS_ADDR=127.0.0.1:0",
			"BRIDGE_LOG_FORMAT=json",
		}, envList(bus.Env())...),
		natsArgs: []string{"-from", "nats", "-nats-url", bus.URL(), "-stream", busStream, "-cluster", cluster},
	}

	// The bridge publishes every object once; each run through the bus
	// restarts it on its checkpoint.
	objects := f.expected()
	br := startChild(b, "bridge", f.bridgeBin, f.bridgeEnv)
	br.waitLog(b, "ready", 10*time.Minute)
	newBusWatch(b, bus).waitStored(b, objects, 5*time.Minute)
	waitSettled(b, br, 5*time.Minute)
	br.stop(b)

	runs := map[string]map[int][]fanoutRun{}
	var window time.Duration
	measure := func(mode string, n int) {
		r := f.run(mode, n, window)
		if window == 0 {
			window = r.window
		}
		runs[mode][n] = append(runs[mode][n], r)
		if testing.Verbose() {
			b.Logf("%s, %s, run %d: API server %.2f s CPU over %s, VmHWM %.0f MiB, VmRSS %.0f MiB; sync median %.2f s, max %.2f s; informers' process %.1f s CPU, VmHWM %.0f MiB",
				mode, informers(n), len(runs[mode][n]), r.cpu.Seconds(), r.window.Round(100*time.Millisecond), mib(r.hwm), mib(r.rss),
				r.median().Seconds(), r.max().Seconds(), r.consumerCPU.Seconds(), mib(r.consumerHWM))
		}
	}
	for _, mode := range []string{"direct", "bus"} {
		runs[mode] = map[int][]fanoutRun{}
		window = 0
		for _, n := range fanoutCounts {
			measure(mode, n)
		}
	}
	lo, hi := slices.Min(fanoutCounts), slices.Max(fanoutCounts)
	for round := 2; round <= fanoutMaxRounds; round++ {
		if round > fanoutRounds && !cpuGrowth(runs).unclear() {
			break
		}
		if round%2 == 0 {
			measure("bus", lo)
			measure("bus", hi)
		} else {
			measure("bus", hi)
			measure("bus", lo)
		}
	}
	f.record(runs)
	b.Logf("fan-out scenario took %s", time.Since(setup.began).Round(time.Second))
}

// fanout is the state the fan-out runs share.
type fanout struct {
	b              *testing.B
	cp             *controlplane.ControlPlane
	kc             kubernetes.Interface
	namespaces     []string
	bin, bridgeBin string
	kubeEnv        []string // the direct informers'
	bridgeEnv      []string
	natsArgs       []string // the informers' from the bus
}

// fanoutRun is what one run measured.
type fanoutRun struct {
	// cpu is the API server's CPU time over window; hwm its VmHWM since
	// its restart, rss its VmRSS at the window's end, in bytes.
	cpu, window time.Duration
	hwm, rss    float64
	// took is each informer's time from its process's start until its
	// cache synced.
	took []time.Duration
	// bridgeReady is, through the bus, the bridge's time from its start
	// until it reported the initial state published.
	bridgeReady time.Duration
	// consumerCPU and consumerHWM are the informers' process's CPU time
	// and VmHWM.
	consumerCPU time.Duration
	consumerHWM float64
}

func (r fanoutRun) median() time.Duration {
	s := slices.Sorted(slices.Values(r.took))
	return s[len(s)/2]
}

func (r fanoutRun) max() time.Duration { return slices.Max(r.took) }

// expected is how many ConfigMaps the cluster holds: an informer on all
// namespaces caches them all.
func (f *fanout) expected() int {
	b := f.b
	others, err := otherConfigMaps(b.Context(), f.kc, f.namespaces)
	if err != nil {
		b.Fatal(err)
	}
	return fanoutObjects + others
}

// run restarts the API server, lets it settle, and measures n informers
// reading from mode ("direct" or "bus") over at least window (its own
// length when window is 0).
func (f *fanout) run(mode string, n int, window time.Duration) fanoutRun {
	b := f.b
	restartCtx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	err := f.cp.RestartAPIServer(restartCtx)
	cancel()
	if err != nil {
		b.Fatalf("restart API server: %v", err)
	}
	objects := f.expected()
	time.Sleep(fanoutSettle)
	pid := f.cp.APIServerPID()

	var r fanoutRun
	start := time.Now()
	cpu0 := procCPUTime(b, pid)
	var br *child
	env, args := f.kubeEnv, []string{"-from", "apiserver"}
	if mode == "bus" {
		br = startChild(b, "bridge", f.bridgeBin, f.bridgeEnv)
		r.bridgeReady = br.waitLog(b, "ready", fanoutSyncTimeout).At.Sub(br.started)
		env, args = nil, f.natsArgs
	}
	c := startChild(b, informers(n)+" ("+mode+")", f.bin, env, append(args, "-n", strconv.Itoa(n))...)
	synced := c.waitLog(b, "synced", fanoutSyncTimeout)
	var line struct {
		ObjectsMin int       `json:"objectsMin"`
		ObjectsMax int       `json:"objectsMax"`
		TookMS     []float64 `json:"tookMs"`
	}
	if err := json.Unmarshal(synced.Raw, &line); err != nil {
		b.Fatalf("%s: %v: %s", c.name, err, synced.Raw)
	}
	if line.ObjectsMin != objects || line.ObjectsMax != objects || len(line.TookMS) != n {
		b.Fatalf("%s synced with %d to %d objects (want %d) and %d times (want %d): %s",
			c.name, line.ObjectsMin, line.ObjectsMax, objects, len(line.TookMS), n, synced.Raw)
	}
	for _, ms := range line.TookMS {
		r.took = append(r.took, time.Duration(ms*float64(time.Millisecond)))
	}

	end := synced.At.Add(fanoutAfter)
	if w := start.Add(window); w.After(end) {
		end = w
	}
	time.Sleep(time.Until(end))
	r.window = time.Since(start)
	r.cpu = procCPUTime(b, pid) - cpu0
	status := procStatus(pid)
	r.hwm, r.rss = status["VmHWM"], status["VmRSS"]
	if r.hwm == 0 || r.rss == 0 {
		b.Fatalf("API server (pid %d): no VmHWM or VmRSS in /proc/%d/status", pid, pid)
	}
	r.consumerCPU = procCPUTime(b, c.cmd.Process.Pid)
	r.consumerHWM = procStatus(c.cmd.Process.Pid)["VmHWM"]
	c.stop(b)
	if br != nil {
		br.stop(b)
	}
	return r
}

// growth is a growth from the fewest to the most informers through the
// bus, judged on its target: the figure, from the medians over rounds,
// and each round's.
type growth struct {
	value    float64
	perRound []float64
	target   Bound
}

func (g growth) unclear() bool {
	var f Figure
	f.Judge("", g.target, g.value, g.perRound)
	return f.Verdict == VerdictUnclear
}

// busGrowth is v's growth through the bus from the fewest to the most
// informers: the median of v over the rounds with the most ÷ that with
// the fewest, and each round's own.
func busGrowth(runs map[string]map[int][]fanoutRun, v func(fanoutRun) float64, target Bound) growth {
	lo, hi := slices.Min(fanoutCounts), slices.Max(fanoutCounts)
	los, his := values(runs["bus"][lo], v), values(runs["bus"][hi], v)
	return growth{value: median(his) / median(los), perRound: ratios(his, los), target: target}
}

func cpuGrowth(runs map[string]map[int][]fanoutRun) growth {
	return busGrowth(runs, fanoutRun.cpuSeconds, fanoutCPUTarget)
}

func (r fanoutRun) cpuSeconds() float64 { return r.cpu.Seconds() }

func (r fanoutRun) peak() float64 { return r.hwm }

// values is v of each run.
func values(rs []fanoutRun, v func(fanoutRun) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = v(r)
	}
	return out
}

// medianOf is the median of v over rs.
func medianOf(rs []fanoutRun, v func(fanoutRun) float64) float64 { return median(values(rs, v)) }

// syncTimes are the sync times of every informer of rs, in one run.
func syncTimes(rs []fanoutRun) fanoutRun {
	var all fanoutRun
	for _, r := range rs {
		all.took = append(all.took, r.took...)
	}
	return all
}

// record turns the runs into figures: the bus's next to the direct
// informers'. A figure of runs repeated in rounds is the median over
// them.
func (f *fanout) record(runs map[string]map[int][]fanoutRun) {
	b := f.b
	bus, direct := runs["bus"], runs["direct"]
	lo, hi := slices.Min(fanoutCounts), slices.Max(fanoutCounts)
	const (
		scenario = "Fan-out to N informers"
		baseline = "N client-go informers on the API server"
	)
	cpu, hwm := fanoutRun.cpuSeconds, fanoutRun.peak
	perN := func(what func([]fanoutRun) string) string {
		var parts []string
		for _, n := range slices.Sorted(slices.Values(fanoutCounts)) {
			parts = append(parts, fmt.Sprintf("N=%d: bus %s, direct %s", n, what(bus[n]), what(direct[n])))
		}
		return strings.Join(parts, "; ")
	}
	each := func(format string, v func(fanoutRun) float64) func([]fanoutRun) string {
		return func(rs []fanoutRun) string {
			parts := make([]string, len(rs))
			for i, r := range rs {
				parts[i] = fmt.Sprintf(format, v(r))
			}
			return strings.Join(parts, ", ")
		}
	}
	rounds := len(bus[hi])
	shape := fmt.Sprintf("%s ConfigMaps of about 2 KiB, plus the few the cluster had already; each run on a freshly restarted kube-apiserver; through the bus, N=%d and N=%d in %d rounds (their median), N=%d and the direct runs once",
		thousands(fanoutObjects), lo, hi, rounds, fanoutCounts[1])
	windows := fmt.Sprintf("Every run of a mode measured over the window of its first N=%d run: %.1f s through the bus (the bridge's restart, list and watch included: it was ready after %s), %.1f s direct",
		hi, bus[hi][0].window.Seconds(), perNBridge(bus), direct[hi][0].window.Seconds())

	for _, n := range slices.Sorted(slices.Values(fanoutCounts)) {
		fig := Figure{
			Scenario: scenario, Name: "API-server CPU, " + informers(n), Unit: "s",
			Bridge: medianOf(bus[n], cpu), Baseline: medianOf(direct[n], cpu), BaselineName: baseline,
			Note: fmt.Sprintf("utime+stime of kube-apiserver (/proc/<pid>/stat) over the run; %s. Through the bus the informers read the bridge's NATS JetStream stream (state layout) with consumer/nats; the bridge's restart on its checkpoint (a list and a watch) is counted in.", shape),
		}
		if len(bus[n]) > 1 {
			fig.Spread(ratios(values(bus[n], cpu), slices.Repeat([]float64{fig.Baseline}, len(bus[n]))))
		}
		record(b, fig)
	}
	cpuGrowth, hwmGrowth := cpuGrowth(runs), busGrowth(runs, hwm, fanoutMemoryTarget)
	directGrowth := func(v func(fanoutRun) float64) float64 { return medianOf(direct[hi], v) / medianOf(direct[lo], v) }
	g := Figure{
		Scenario: scenario, Name: fmt.Sprintf("API-server CPU growth from %d to %d informers", lo, hi), Unit: "×",
		Bridge: cpuGrowth.value, Baseline: directGrowth(cpu), BaselineName: baseline,
		Note: fmt.Sprintf("API-server CPU with %d informers ÷ with %d, through the bus the median of %d rounds ÷ the median of %d (each round's own: %s). %s. CPU seconds %s. The informers' own process used %s CPU seconds.",
			hi, lo, rounds, rounds, list3(cpuGrowth.perRound), windows, perN(each("%.2f", cpu)),
			perN(each("%.1f", func(r fanoutRun) float64 { return r.consumerCPU.Seconds() }))),
	}
	g.Judge("bridge "+fanoutCPUTarget.String(), fanoutCPUTarget, cpuGrowth.value, cpuGrowth.perRound)
	record(b, g)
	m := Figure{
		Scenario: scenario, Name: fmt.Sprintf("API-server peak memory growth from %d to %d informers", lo, hi), Unit: "×",
		Bridge: hwmGrowth.value, Baseline: directGrowth(hwm), BaselineName: baseline,
		Note: fmt.Sprintf("kube-apiserver's VmHWM (peak RSS since its restart before the run) with %d informers ÷ with %d, through the bus the median of %d rounds ÷ the median of %d. VmHWM / VmRSS at the window's end, MiB: %s. The informers' process's VmHWM, MiB (managedFields dropped by a transform): %s.",
			hi, lo, rounds, rounds,
			perN(func(rs []fanoutRun) string {
				parts := make([]string, len(rs))
				for i, r := range rs {
					parts[i] = fmt.Sprintf("%.0f / %.0f", mib(r.hwm), mib(r.rss))
				}
				return strings.Join(parts, ", ")
			}),
			perN(each("%.0f", func(r fanoutRun) float64 { return mib(r.consumerHWM) }))),
	}
	m.Judge("bridge "+fanoutMemoryTarget.String(), fanoutMemoryTarget, hwmGrowth.value, hwmGrowth.perRound)
	record(b, m)
	peak := Figure{
		Scenario: scenario, Name: "API-server peak memory, " + informers(hi), Unit: "MiB",
		Bridge: mib(medianOf(bus[hi], hwm)), Baseline: mib(medianOf(direct[hi], hwm)), BaselineName: baseline,
		Note: "kube-apiserver's VmHWM since its restart before the run; through the bus the median of the rounds.",
	}
	if len(bus[hi]) > 1 {
		peak.Spread(ratios(values(bus[hi], hwm), slices.Repeat([]float64{medianOf(direct[hi], hwm)}, len(bus[hi]))))
	}
	record(b, peak)
	for _, n := range slices.Sorted(slices.Values(fanoutCounts)) {
		busSync, directSync := syncTimes(bus[n]), syncTimes(direct[n])
		record(b, Figure{
			Scenario: scenario, Name: "time to sync, " + informers(n) + ", median", Unit: "s",
			Bridge: busSync.median().Seconds(), Baseline: directSync.median().Seconds(), BaselineName: baseline,
			Note: fmt.Sprintf("each informer's time from its process's start until its cache synced (all %d of a run started at once in one process), over every run with %d (bus %d, direct %d); slowest: bus %.2f s, direct %.2f s. Through the bus this is reading the state from the stream; the bridge had published it.",
				n, n, len(bus[n]), len(direct[n]), busSync.max().Seconds(), directSync.max().Seconds()),
		})
	}
}

// perNBridge lists, through the bus, the bridge's time to ready per run.
func perNBridge(bus map[int][]fanoutRun) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(bus)) {
		for _, r := range bus[n] {
			parts = append(parts, fmt.Sprintf("%.1f s (N=%d)", r.bridgeReady.Seconds(), n))
		}
	}
	return strings.Join(parts, ", ")
}

// list3 is xs with three decimals.
func list3(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, ", ")
}

// informers is "1 informer", "10 informers".
func informers(n int) string {
	if n == 1 {
		return "1 informer"
	}
	return fmt.Sprintf("%d informers", n)
}

// procCPUTime is cpuTime, failing the benchmark on error.
func procCPUTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	d, err := cpuTime(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
