package bench

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/synthetic"
	"github.com/kubebus/bridge/wire"
)

// throughputScenario names the figures of BenchmarkThroughput.
const throughputScenario = "Pipeline throughput"

// A throughput row runs the bridge and the baseline in rounds, one run of
// each per round, alternating which goes first (the bridge in odd rounds,
// the baseline in even ones) so that the noise of a shared machine hits
// both; each figure is each side's median. A row runs throughputRounds
// rounds, then one more at a time, up to throughputMaxRounds, while a
// figure of the row is unclear: its rounds disagree on its target.
const (
	throughputRounds    = 3
	throughputMaxRounds = 7
)

// The targets of a throughput row, on bridge ÷ baseline.
var (
	throughputTarget = AtLeast(1.0)
	cpuPerMsgTarget  = AtMost(1.25)
)

// rowQuiet is when the machine is quiet enough for a throughput row: its
// 1-minute load average under 1 for three readings a second apart. A row
// waits for it at most 90 s, then runs anyway and says so in its notes.
// The wait is per row, not per round: the 1-minute average decays over
// about a minute, and each round is a few seconds.
var rowQuiet = QuietPolicy{Limit: 1, Readings: 3, Every: time.Second, Bound: 90 * time.Second}

// quietRow waits, before the runs of a throughput-type row, until the
// machine is quiet as rowQuiet says, and returns what describes the
// machine's load for the row's notes, to be called at the row's end.
func quietRow(b *testing.B) (atEnd func() string) {
	b.Helper()
	q := rowQuiet.WaitQuiet(b.Context(), nil)
	start := ""
	switch {
	case q.Load < 0:
		start = "machine load unknown (no /proc/loadavg), not waited for"
	case q.Quiet:
		start = fmt.Sprintf("machine load (1-minute average) %.2f at the row's start, quiet (under %.0f for %d readings) after %s", q.Load, rowQuiet.Limit, rowQuiet.Readings, q.Waited.Round(time.Second))
	default:
		start = fmt.Sprintf("machine not quiet: load (1-minute average) %.2f at the row's start, after waiting the %s bound for it to stay under %.0f", q.Load, rowQuiet.Bound, rowQuiet.Limit)
	}
	b.Log(start)
	return func() string {
		end, err := LoadAverage()
		if err != nil {
			return start
		}
		return fmt.Sprintf("%s, %.2f at its end", start, end)
	}
}

// throughputCluster is BRIDGE_CLUSTER_NAME in the scenario.
const throughputCluster = "bench"

// throughputWorkloads are the workloads of the scenario: updates of
// distinct objects, as a busy cluster makes them, so that every change is
// published (none is collapsed) and every batch is one round.
var throughputWorkloads = []struct {
	kind, size string
	resource   source.Resource
	count      int
	object     func(i int) runtime.Object
}{
	{"ConfigMaps", "~1 KiB", synthetic.ConfigMaps, 40_000, func(i int) runtime.Object { return synthetic.ConfigMap(i) }},
	{"Pods", "~10 KiB", synthetic.Pods, 8_000, func(i int) runtime.Object { return synthetic.Pod(i) }},
}

// workload is a set of changes fed to the bridge, and the messages the
// bridge makes of them, which the baseline publishes as they are.
type workload struct {
	name   string // "ConfigMaps ~1 KiB"
	deltas []source.Delta
	msgs   []*wire.Message // deltas[i] encoded, as the pipeline encodes it
	bodies [][]byte        // msgs[i] as a structured-mode event
	// via, when set, is what the source does to each delta before it
	// hands it on (see runPipeline): a view's Apply. Then the messages the
	// bridge publishes are not msgs.
	via func(*source.Delta) bool
}

// throughputBus is one bus of the scenario.
type throughputBus interface {
	// Name is the bus as figures name it.
	Name() string
	// BaselineName says what the baseline is.
	BaselineName() string
	// Settings describes the settings of both sides, for the figure's note.
	Settings() string
	// Prepare builds what the baseline publishes for wl: the very messages
	// the bridge's sink makes.
	Prepare(b *testing.B, wl *workload)
	// Bridge publishes wl through the bridge's pipeline to a new server.
	// With verify it also checks that the server holds what the baseline
	// publishes.
	Bridge(b *testing.B, wl *workload, verify bool) runResult
	// Baseline publishes the prepared messages with the bus's own client
	// to a new server.
	Baseline(b *testing.B, wl *workload) runResult
}

// runResult is one run of either side.
type runResult struct {
	took time.Duration // from the first message handed over to the last ack (for the bridge, to its checkpoint flushed)
	cpu  time.Duration // CPU time of the whole process meanwhile, broker included
}

// BenchmarkThroughput measures how many messages per second the bridge
// publishes, from deltas handed to the pipeline to acknowledgements from
// the bus, next to the bus's own client publishing the same messages with
// the same settings. Each run is a sub-benchmark of its own, with a new
// server, so that no run finds another's messages (or their ids, which a
// stream drops as repeats) and each server's memory goes with its run.
func BenchmarkThroughput(b *testing.B) {
	for _, newBus := range []func() throughputBus{
		func() throughputBus { return &natsBus{} },
		func() throughputBus { return &kafkaBus{} },
	} {
		for _, w := range throughputWorkloads {
			bus := newBus()
			b.Run(bus.Name()+"/"+w.kind, func(b *testing.B) {
				wl := buildWorkload(b, w.kind+" "+w.size, w.resource, w.count, w.object)
				bus.Prepare(b, wl)
				measureThroughput(b, bus, wl)
			})
		}
	}
}

// measuredRun runs side, which publishes n messages, as the
// sub-benchmark name and reports its rate and CPU per message.
func measuredRun(b *testing.B, name string, n float64, side func(b *testing.B) runResult) runResult {
	var r runResult
	b.Run(name, func(b *testing.B) {
		// In a CPU profile (-cpuprofile) the samples of each run carry
		// its name: go tool pprof -tagfocus run=bridge-1.
		pprof.Do(context.Background(), pprof.Labels("run", name), func(context.Context) { r = side(b) })
		b.ReportMetric(n/r.took.Seconds(), "msg/s")
		b.ReportMetric(float64(r.cpu.Microseconds())/n, "cpu-µs/msg")
	})
	return r
}

// rates are the messages per second of runs that each published n.
func rates(n float64, rs []runResult) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = n / r.took.Seconds()
	}
	return out
}

// cpusPerMsg are the CPU times per message, in µs, of runs that each
// published n.
func cpusPerMsg(n float64, rs []runResult) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = float64(r.cpu.Microseconds()) / n
	}
	return out
}

// ratios are a[i] ÷ b[i]: each round's bridge ÷ baseline.
func ratios(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		if b[i] != 0 {
			out[i] = a[i] / b[i]
		}
	}
	return out
}

// anyUnclear reports whether a figure of fs is unclear on its target.
func anyUnclear(fs []Figure) bool {
	return slices.ContainsFunc(fs, func(f Figure) bool { return f.Verdict == VerdictUnclear })
}

func measureThroughput(b *testing.B, bus throughputBus, wl *workload) {
	loadAtEnd := quietRow(b)
	n := float64(len(wl.msgs))
	run := func(name string, side func(b *testing.B) runResult) runResult { return measuredRun(b, name, n, side) }
	bridge := func(b *testing.B) runResult { return bus.Bridge(b, wl, false) }
	baseline := func(b *testing.B) runResult { return bus.Baseline(b, wl) }

	// One unmeasured run of each warms up code paths, caches and the file
	// system; the bridge's also checks what it published.
	run("warm-up-bridge", func(b *testing.B) runResult { return bus.Bridge(b, wl, true) })
	run("warm-up-baseline", baseline)
	bridgeRuns, baselineRuns := alternate(run, "bridge-", bridge, "baseline-", baseline, func(bridgeRuns, baselineRuns []runResult) bool {
		return anyUnclear(throughputFigures(bus, wl, bridgeRuns, baselineRuns, ""))
	})
	if b.Failed() {
		return
	}
	for _, f := range throughputFigures(bus, wl, bridgeRuns, baselineRuns, loadAtEnd()) {
		record(b, f)
	}
}

// throughputFigures are the figures of a throughput row from its runs:
// CPU per message first, the figure the noise of a shared machine moves
// least, then messages per second. load describes the machine's load.
func throughputFigures(bus throughputBus, wl *workload, bridgeRuns, baselineRuns []runResult, load string) []Figure {
	n := float64(len(wl.msgs))
	row := bus.Name() + ", " + wl.name
	bridgeCPU, baselineCPU := cpusPerMsg(n, bridgeRuns), cpusPerMsg(n, baselineRuns)
	c := Figure{
		Scenario:     throughputScenario,
		Name:         row + ", CPU per message",
		Row:          row,
		Order:        0,
		Unit:         "µs/msg",
		Bridge:       median(bridgeCPU),
		Baseline:     median(baselineCPU),
		BaselineName: bus.BaselineName(),
		Note: fmt.Sprintf("user and system CPU of the whole process (the in-process broker included, on both sides) per message, median of the same %d rounds as the row's msg/s (bridge %s µs, baseline %s µs); %s",
			len(bridgeRuns), list1(bridgeCPU), list1(baselineCPU), load),
	}
	c.Judge(cpuPerMsgTarget.String()+" baseline", cpuPerMsgTarget, c.Ratio(), ratios(bridgeCPU, baselineCPU))

	bridgeRates, baselineRates := rates(n, bridgeRuns), rates(n, baselineRuns)
	f := Figure{
		Scenario:     throughputScenario,
		Name:         row,
		Row:          row,
		Order:        1,
		Unit:         "msg/s",
		Bridge:       median(bridgeRates),
		Baseline:     median(baselineRates),
		BaselineName: bus.BaselineName(),
	}
	f.Judge(throughputTarget.String()+" baseline", throughputTarget, f.Ratio(), ratios(bridgeRates, baselineRates))
	f.Note = fmt.Sprintf("%d updates of distinct objects (held in memory as the API server's JSON, as the source's default path hands them on, through the runs of both sides), events of %s on average; median of %d alternating rounds, one run per side each, each run with a new server "+
		"(bridge %s msg/s, baseline %s msg/s); CPU of the whole process, in-process broker included, per message: bridge %.1f µs, baseline %.1f µs; %s; %s",
		len(wl.msgs), kib(avgLen(wl.bodies)), len(bridgeRuns), list(bridgeRates), list(baselineRates),
		c.Bridge, c.Baseline, bus.Settings(), load)
	return []Figure{c, f}
}

// buildWorkload makes count updates of distinct objects and encodes them
// as the bridge does.
func buildWorkload(b *testing.B, name string, r source.Resource, count int, object func(int) runtime.Object) *workload {
	b.Helper()
	enc := event.Encoder{Cluster: throughputCluster}
	observed := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	wl := &workload{name: name}
	for i := range count {
		obj := object(i)
		d := synthetic.Update(r, obj, observed.Add(time.Duration(i)*time.Microsecond))
		// The source's default path hands on the object as the API
		// server sent it: its JSON, read by rawobject.Scan.
		data, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		meta, err := rawobject.Scan(data)
		if err != nil {
			b.Fatal(err)
		}
		d.Object, d.Raw = nil, rawaccess.New(data, meta).(*source.RawObject)
		m, err := enc.Encode(&d)
		if err != nil {
			b.Fatal(err)
		}
		body, err := m.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		wl.deltas = append(wl.deltas, d)
		wl.msgs = append(wl.msgs, m)
		wl.bodies = append(wl.bodies, body)
	}
	return wl
}

// alternate runs a and b in rounds, a first in odd rounds and b first in
// even ones, so that the noise of a shared machine hits both, and returns
// their results, round i's of a and of b at index i. It runs
// throughputRounds rounds, then one more at a time, up to
// throughputMaxRounds, while more, given the runs so far, asks for them.
func alternate(run func(string, func(*testing.B) runResult) runResult, aName string, a func(*testing.B) runResult, bName string, b func(*testing.B) runResult, more func(aRuns, bRuns []runResult) bool) (aRuns, bRuns []runResult) {
	for r := 1; r <= throughputMaxRounds; r++ {
		if r > throughputRounds && !more(aRuns, bRuns) {
			break
		}
		if r%2 == 1 {
			aRuns = append(aRuns, run(fmt.Sprint(aName, r), a))
			bRuns = append(bRuns, run(fmt.Sprint(bName, r), b))
		} else {
			bRuns = append(bRuns, run(fmt.Sprint(bName, r), b))
			aRuns = append(aRuns, run(fmt.Sprint(aName, r), a))
		}
	}
	return aRuns, bRuns
}

// timed runs publish, which returns once the last message is
// acknowledged, and measures it.
func timed(publish func()) runResult {
	// Start from a collected heap, so that no run pays for the garbage of
	// the one before.
	goruntime.GC()
	cpu := processCPU()
	start := time.Now()
	publish()
	return runResult{took: time.Since(start), cpu: processCPU() - cpu}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func avgLen(bs [][]byte) float64 {
	total := 0
	for _, b := range bs {
		total += len(b)
	}
	return float64(total) / float64(max(len(bs), 1))
}

func kib(n float64) string { return fmt.Sprintf("%.1f KiB", n/1024) }

func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, ", ")
}

// list1 is xs with one decimal.
func list1(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, ", ")
}
