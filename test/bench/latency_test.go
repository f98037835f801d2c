package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	latencyScenario = "End-to-end latency"
	// latencyBaselineName says what the baseline is.
	latencyBaselineName = "bare client-go watch"
	// latencyTargetMargin is how much the bridge's p99 may exceed the bare
	// watch's.
	latencyTargetMargin = 2 * time.Millisecond

	// latencyStepDuration is how long the writers run at each rate while
	// the scenario looks for the highest rate the API server sustains.
	latencyStepDuration = 6 * time.Second
	// latencyRunDuration is how long they run at that rate for the figures,
	// of which the first latencyWarmUp is not counted.
	latencyRunDuration = 50 * time.Second
	latencyWarmUp      = 3 * time.Second
	// latencySettle bounds the wait, after the writers stop, for both
	// observers to have seen every write.
	latencySettle = 20 * time.Second
	// latencySaneWatchP99 is the bare watch's p99 above which the API
	// server is taken to be overloaded: its own fan-out queues, and a
	// latency figure at that rate would measure the queue.
	latencySaneWatchP99 = 100 * time.Millisecond
	// latencyPace is the share of the target rate the writers must reach.
	latencyPace = 0.95
	// latencyWindows is how many consecutive windows of equal length a
	// measured run is cut into: each window's figure is a round of its
	// own, and the spread of a latency figure is the least and the
	// greatest of them.
	latencyWindows = 5

	// latencyProfilesEnv names a directory for a CPU profile and an
	// execution trace of the bridge, taken during the measured run; unset,
	// none is taken.
	latencyProfilesEnv = "BENCH_LATENCY_PROFILES"
)

// latencyRates are the write rates tried, in updates per second, lowest
// first.
var latencyRates = []float64{100, 200, 400, 600, 800, 1000, 1200, 1600, 2000, 2400, 3200}

// BenchmarkLatency measures the time from the API server answering a
// ConfigMap update to a NATS subscriber receiving the bridge's message
// about it, next to the time from the same answer to a bare client-go
// watch's event, at the highest steady update rate the API server
// sustains on this machine.
//
// The bridge runs as a child process configured by environment variables,
// as in production, with the file checkpoint and the NATS JetStream sink.
// The consumer is another child process (cmd/observer) holding both the
// subscription (an ordered consumer) and the bare watch, so that both are
// timed alike. The NATS server is a child process of its own
// (cmd/natsserver), as a broker is in production; the writers run in the
// benchmark's process. Writers update 512 ConfigMaps, each writer paced by a ticker;
// every update is matched, by name and resourceVersion, with the
// subscriber's message and the watch's event: both see the very same
// writes.
//
// The rate is found by stepping it up: a rate is sustained while the
// writers keep their pace, every write reaches both observers, and the
// bare watch's p99 stays under latencySaneWatchP99. When the measured run
// does not hold the highest sustained step's rate, it is made again one
// step lower.
//
// The bridge's delay is also split into stages, from the times its
// messages carry: the API server to the bridge's informer handing the
// change over (the event's time attribute), on to the NATS server storing
// the message (its stream timestamp), and on to the subscriber. A bare
// client-go informer in the consumer's process shows what client-go's
// informer machinery, which the bridge is built on, costs by itself.
//
// How loaded the machine was is measured too: the time the bridge's and
// the kube-apiserver's threads waited on a CPU's run queue while runnable
// (/proc/<pid>/task/*/schedstat), and the bridge's garbage collection
// pauses (it runs with GODEBUG=gctrace=1).
func BenchmarkLatency(b *testing.B) {
	env := map[string]string{}
	profiles := os.Getenv(latencyProfilesEnv)
	if profiles != "" {
		env["BRIDGE_PPROF"] = "true"
	}
	r := startLatencyRig(b, env)
	ctx := b.Context()

	// Warm the API server, the bridge and the observers up.
	r.step(ctx, latencyRates[0], latencyWarmUp, latencyWarmUp)

	// A rate is tried twice before it counts as not sustained: other work
	// on the machine may spoil one step.
	var (
		rate  float64
		steps []string
	)
	for _, try := range latencyRates {
		var why string
		for attempt := range 2 {
			s := r.step(ctx, try, latencyStepDuration, 0)
			b.Logf("step: %s", s)
			if why = s.overloaded(); why == "" {
				break
			}
			b.Logf("step: %.0f updates/s not sustained (attempt %d): %s", try, attempt+1, why)
		}
		steps = append(steps, fmt.Sprintf("%.0f", try))
		if why != "" {
			steps[len(steps)-1] += " (not sustained)"
			break
		}
		rate = try
	}
	sustained := rate > 0
	if !sustained {
		// Report what the lowest rate gives, and say it was not sustained.
		rate = latencyRates[0]
	}

	// A step's few seconds may pass at a rate the API server does not hold
	// for a whole run: then the run is made again one step lower.
	var (
		s          latencyStep
		loadBefore string
		loadAfter  string
		dropped    string
		// traced is what execution traces of 5 s of the run tell, when
		// profiles are taken.
		traced string
	)
	for {
		var stopProfiles func() string
		if profiles != "" {
			stopProfiles = r.profile(b, profiles, latencyRunDuration-latencyWarmUp)
		}
		loadBefore = latencyLoadAverage()
		s = r.step(ctx, rate, latencyRunDuration, latencyWarmUp)
		loadAfter = latencyLoadAverage()
		if stopProfiles != nil {
			traced = stopProfiles()
		}
		b.Logf("run: %s", s)
		why := s.overloaded()
		lower := slices.Index(latencyRates, rate) - 1
		if why == "" || dropped != "" || lower < 0 {
			break
		}
		dropped = fmt.Sprintf("a run at %.0f updates/s was not sustained (%s), so the rate measured is one step lower", rate, why)
		b.Logf("run: %s", dropped)
		rate = latencyRates[lower]
	}
	if len(s.watch) == 0 {
		b.Fatal("no write was seen by both observers")
	}
	for _, a := range []*latencyArrivals{r.watch, r.bus} {
		a.mu.Lock()
		if a.bad > 0 {
			b.Errorf("the consumer reported %d arrivals it could not read", a.bad)
		}
		a.mu.Unlock()
	}

	ms := func(ds []time.Duration, q float64) float64 { return latencyMillis(latencyPercentile(ds, q)) }
	chosen := "the highest sustained step"
	if !sustained {
		chosen = "the lowest step, as none was sustained"
	}
	note := fmt.Sprintf("%.0f ConfigMap updates/s (%.0f reached) over %d objects, %s measured after %s of warm-up, %d updates seen by both. "+
		"Steps tried: %s updates/s, %s each; a step is sustained when the writers keep %.0f%% of the pace, every update reaches both observers, "+
		"and the bare watch's p99 stays under %s. The rate measured is %s",
		s.rate, s.achieved, latencyObjects, latencyRunDuration-latencyWarmUp, latencyWarmUp, len(s.watch),
		strings.Join(steps, ", "), latencyStepDuration, 100*latencyPace, latencySaneWatchP99, chosen)
	if dropped != "" {
		note += "; " + dropped
	}
	if why := s.overloaded(); why != "" {
		note += "; in the measured run itself, " + why
	}
	note += fmt.Sprintf(". Update calls took %.1f ms at p50 and %.1f ms at p99. 1-minute load average %s then %s on %d CPUs",
		ms(s.calls, 0.5), ms(s.calls, 0.99), loadBefore, loadAfter, runtime.NumCPU())
	stages := func(q float64) string {
		return fmt.Sprintf("the API server to the bridge's informer %.1f ms, on to the NATS server storing the message %.1f ms, on to the subscriber %.1f ms",
			ms(s.observed, q), ms(s.stored, q), ms(s.delivered, q))
	}
	windows := fmt.Sprintf("The spread is the figure in each of %d consecutive windows of %s of the measured run", latencyWindows, (latencyRunDuration-latencyWarmUp)/latencyWindows)
	p99 := Figure{
		Scenario:     latencyScenario,
		Name:         "p99, ConfigMap update to NATS subscriber",
		Unit:         "ms",
		Bridge:       ms(s.bridge, 0.99),
		Baseline:     ms(s.watch, 0.99),
		BaselineName: latencyBaselineName,
		Difference:   true,
		Note: note + fmt.Sprintf(". Each stage's p99: %s. Per update, the subscriber's delay minus the watch's: p99 %.1f ms. "+
			"A bare client-go informer in the consumer's process, for comparison: p99 %.1f ms. While the writers ran, %s. %s",
			stages(0.99), ms(s.extra, 0.99), ms(s.informer, 0.99), s.contention(), windows) + traceNote(traced),
	}
	p99.Judge(fmt.Sprintf("≤ baseline + %d ms", latencyTargetMargin.Milliseconds()), AtMost(latencyMillis(latencyTargetMargin)),
		p99.Bridge-p99.Baseline, latencyWindowDiffs(s.windows, 0.99))
	record(b, p99)
	p50 := Figure{
		Scenario:     latencyScenario,
		Name:         "p50, ConfigMap update to NATS subscriber",
		Unit:         "ms",
		Bridge:       ms(s.bridge, 0.5),
		Baseline:     ms(s.watch, 0.5),
		BaselineName: latencyBaselineName,
		Difference:   true,
		Note: fmt.Sprintf("The same %d updates as the p99. The watch's event often comes before the writer's update call has returned, "+
			"hence a p50 near zero. Each stage's p50: %s. Per update, the subscriber's delay minus the watch's: p50 %.1f ms. "+
			"A bare client-go informer in the consumer's process: p50 %.1f ms. %s",
			len(s.watch), stages(0.5), ms(s.extra, 0.5), ms(s.informer, 0.5), windows),
	}
	p50.Spread(latencyWindowDiffs(s.windows, 0.5))
	record(b, p50)
}

// traceNote is the sentence the p99's note ends with when execution
// traces were taken.
func traceNote(traced string) string {
	if traced == "" {
		return ""
	}
	return ". Execution traces of 5 s of the run (" + latencyProfilesEnv + "): " + traced
}

// latencyLoadAverage is the machine's 1-minute load average, or "unknown".
func latencyLoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// latencyStep is what one run of the writers at one rate measured. The
// durations are sorted, and cover the writes both observers saw.
type latencyStep struct {
	rate, achieved float64
	writes, failed int
	// unseenWatch and unseenBus count the writes the bare watch and the
	// subscriber had not seen when the wait for them ended.
	unseenWatch, unseenBus int
	// watch and bridge are the delays from a write's answer to the bare
	// watch's event and to the subscriber's message.
	watch, bridge []time.Duration
	// extra is, per write, the bridge's delay minus the watch's.
	extra []time.Duration
	// The bridge's delay in three stages: from a write's answer to the
	// bridge's informer handing the change over (the event's time);
	// from there to the NATS server storing the message (the pipeline,
	// the sink and the broker taking it in); and from there to the
	// subscriber receiving it.
	observed, stored, delivered []time.Duration
	// informer is the delay to a bare client-go informer in the
	// consumer's process.
	informer []time.Duration
	// calls are how long the update calls took, all of them.
	calls []time.Duration
	// windows are the writes after skip cut into latencyWindows
	// consecutive windows of equal length: each window's delays to the
	// bare watch and to the subscriber.
	windows []latencyWindow
	// bridgeCPU is the CPU time the bridge used while the writers ran, as a
	// share of one CPU.
	bridgeCPU float64
	// How long the bridge's, the kube-apiserver's and the consumer's
	// threads ran, and waited on a CPU's run queue while runnable, while
	// the writers ran.
	bridgeSched, apiSched, observerSched latencySchedStat
	// gcPauses are the stop-the-world pauses of the bridge's garbage
	// collections while the writers ran after skip, sorted.
	gcPauses []time.Duration
	// slowest and slowestInGC are how many updates are among the 1% whose
	// bridge-minus-watch delay is largest, and how many of those had a
	// stop-the-world pause of the bridge between their write and their
	// message.
	slowest, slowestInGC int
}

// step runs the writers at rate for d and measures the writes made after
// the first skip.
func (r *latencyRig) step(ctx context.Context, rate float64, d, skip time.Duration) latencyStep {
	began := time.Now()
	pid := r.bridge.cmd.Process.Pid
	cpu := latencyCPUTime(pid)
	bridgeSched, apiSched, observerSched := latencySched(pid), latencySched(r.apiServer), latencySched(r.observer)
	writes, failed := r.write(ctx, rate, d)
	ended := time.Now()
	s := latencyStep{rate: rate, achieved: float64(len(writes)) / d.Seconds(), writes: len(writes), failed: failed}
	s.bridgeCPU = (latencyCPUTime(pid) - cpu).Seconds() / ended.Sub(began).Seconds()
	s.bridgeSched = latencySched(pid).since(bridgeSched)
	s.apiSched = latencySched(r.apiServer).since(apiSched)
	s.observerSched = latencySched(r.observer).since(observerSched)
	pauses := latencyGCPauses(r.bridge, began.Add(skip), ended.Add(latencySettle))
	for _, p := range pauses {
		if p.at.Before(ended) {
			s.gcPauses = append(s.gcPauses, p.d)
		}
	}
	for _, w := range writes {
		s.calls = append(s.calls, w.took)
	}
	r.settle(writes, latencySettle)
	s.unseenWatch, s.unseenBus = r.missing(writes)

	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	r.bus.mu.Lock()
	defer r.bus.mu.Unlock()
	r.informer.mu.Lock()
	defer r.informer.mu.Unlock()
	s.windows = make([]latencyWindow, latencyWindows)
	window := (d - skip) / latencyWindows
	for _, w := range writes {
		if w.at.Sub(began) < skip {
			continue
		}
		we, ok1 := r.watch.at[w.key]
		be, ok2 := r.bus.at[w.key]
		if !ok1 || !ok2 {
			continue
		}
		// The observer's times are another process's wall clock readings:
		// compare wall clocks.
		at := w.at.Round(0)
		s.watch = append(s.watch, we.at.Sub(at))
		s.bridge = append(s.bridge, be.at.Sub(at))
		if window > 0 {
			i := min(int((w.at.Sub(began)-skip)/window), latencyWindows-1)
			s.windows[i].add(we.at.Sub(at), be.at.Sub(at))
		}
		s.extra = append(s.extra, be.at.Sub(we.at))
		s.observed = append(s.observed, be.observed.Sub(at))
		s.stored = append(s.stored, be.stored.Sub(be.observed))
		s.delivered = append(s.delivered, be.at.Sub(be.stored))
		if ie, ok := r.informer.at[w.key]; ok {
			s.informer = append(s.informer, ie.at.Sub(at))
		}
	}
	// Which of the slowest updates, by the bridge's delay over the
	// watch's, a pause of the bridge held up.
	type slow struct {
		extra         time.Duration
		written, seen time.Time
	}
	var slows []slow
	for _, w := range writes {
		we, ok1 := r.watch.at[w.key]
		be, ok2 := r.bus.at[w.key]
		if ok1 && ok2 && w.at.Sub(began) >= skip {
			slows = append(slows, slow{be.at.Sub(we.at), w.at.Round(0), be.at})
		}
	}
	slices.SortFunc(slows, func(a, b slow) int { return cmp.Compare(b.extra, a.extra) })
	s.slowest = (len(slows) + 99) / 100
	for _, u := range slows[:s.slowest] {
		if slices.ContainsFunc(pauses, func(p latencyPause) bool {
			return p.d > 0 && p.at.Before(u.seen) && p.at.Add(p.d).After(u.written)
		}) {
			s.slowestInGC++
		}
	}
	for _, ds := range [][]time.Duration{s.watch, s.bridge, s.extra, s.observed, s.stored, s.delivered, s.informer, s.calls, s.gcPauses} {
		slices.Sort(ds)
	}
	return s
}

// overloaded says why the API server did not sustain the step's rate, or
// returns "" when it did.
func (s latencyStep) overloaded() string {
	var why []string
	if s.achieved < latencyPace*s.rate {
		why = append(why, fmt.Sprintf("the writers reached %.0f updates/s", s.achieved))
	}
	if s.failed > 0 {
		why = append(why, fmt.Sprintf("%d updates failed", s.failed))
	}
	if s.unseenWatch > 0 || s.unseenBus > 0 {
		why = append(why, fmt.Sprintf("after %s, %d updates had not reached the bare watch and %d the subscriber", latencySettle, s.unseenWatch, s.unseenBus))
	}
	if p99 := latencyPercentile(s.watch, 0.99); p99 > latencySaneWatchP99 {
		why = append(why, fmt.Sprintf("the bare watch's p99 was %s", p99.Round(time.Millisecond)))
	}
	return strings.Join(why, "; ")
}

func (s latencyStep) String() string {
	ms := func(ds []time.Duration, q float64) float64 { return latencyMillis(latencyPercentile(ds, q)) }
	return fmt.Sprintf("%.0f updates/s (reached %.0f, %d failed; update call p50 %.1f ms p99 %.1f ms; bridge CPU %.0f%%), %d samples: bare watch p50 %.1f ms p99 %.1f ms max %.1f ms; "+
		"bridge p50 %.1f ms p99 %.1f ms max %.1f ms; bridge minus watch p50 %.1f ms p99 %.1f ms; stages: to the bridge's informer p50 %.1f ms p99 %.1f ms, to stored p50 %.1f ms p99 %.1f ms, to the subscriber p50 %.1f ms p99 %.1f ms; bare informer p50 %.1f ms p99 %.1f ms; %s",
		s.rate, s.achieved, s.failed, ms(s.calls, 0.5), ms(s.calls, 0.99), 100*s.bridgeCPU, len(s.watch),
		ms(s.watch, 0.5), ms(s.watch, 0.99), ms(s.watch, 1),
		ms(s.bridge, 0.5), ms(s.bridge, 0.99), ms(s.bridge, 1),
		ms(s.extra, 0.5), ms(s.extra, 0.99),
		ms(s.observed, 0.5), ms(s.observed, 0.99),
		ms(s.stored, 0.5), ms(s.stored, 0.99),
		ms(s.delivered, 0.5), ms(s.delivered, 0.99),
		ms(s.informer, 0.5), ms(s.informer, 0.99), s.contention())
}

// contention says how much the bridge, the API server and the consumer
// waited for a CPU and how long the bridge's garbage collections stopped
// it.
func (s latencyStep) contention() string {
	ms := func(ds []time.Duration, q float64) float64 { return latencyMillis(latencyPercentile(ds, q)) }
	return fmt.Sprintf("the bridge's threads %s; the kube-apiserver's %s; the consumer's %s; "+
		"the bridge's %d GC stop-the-world pauses: p50 %.2f ms, p99 %.2f ms, max %.2f ms; of the %d updates whose delay over the watch's was largest (the top 1%%), "+
		"%d had one of those pauses between their write and their message",
		s.bridgeSched, s.apiSched, s.observerSched,
		len(s.gcPauses), ms(s.gcPauses, 0.5), ms(s.gcPauses, 0.99), ms(s.gcPauses, 1), s.slowest, s.slowestInGC)
}

// latencyWindow is one window of a measured run: the delays of its
// writes to the baseline and to the bridge's consumer, in the order of
// the writes.
type latencyWindow struct {
	baseline, bridge []time.Duration
}

func (w *latencyWindow) add(baseline, bridge time.Duration) {
	w.baseline = append(w.baseline, baseline)
	w.bridge = append(w.bridge, bridge)
}

// latencyWindowDiffs is, for each window with samples, the bridge's
// q-quantile minus the baseline's, in ms: the rounds a latency figure's
// spread is taken over.
func latencyWindowDiffs(ws []latencyWindow, q float64) []float64 {
	var out []float64
	for _, w := range ws {
		if len(w.bridge) == 0 {
			continue
		}
		base, bridge := slices.Sorted(slices.Values(w.baseline)), slices.Sorted(slices.Values(w.bridge))
		out = append(out, latencyMillis(latencyPercentile(bridge, q))-latencyMillis(latencyPercentile(base, q)))
	}
	return out
}

// latencyPercentile is the q-quantile of sorted by the nearest-rank
// method; 0 for no samples.
func latencyPercentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func latencyMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// profile takes a CPU profile of the bridge for about d, starting after
// the warm-up, and short execution traces of the bridge and of the
// benchmark's own process, into dir. The returned function waits for them
// and says what the traces tell of each process's scheduling.
func (r *latencyRig) profile(b *testing.B, dir string, d time.Duration) func() string {
	b.Helper()
	addr := r.bridge.metricsAddr(b)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	fetch := func(path, file string) error {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	errs := make(chan error, 3)
	go func() {
		time.Sleep(latencyWarmUp)
		errs <- fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())-2), "bridge-cpu.pprof")
	}()
	go func() {
		time.Sleep(latencyWarmUp + d/2)
		errs <- fetch("/debug/pprof/trace?seconds=5", "bridge.trace")
	}()
	go func() {
		// The benchmark's own process, over the same seconds: it runs the
		// writers and the NATS server.
		time.Sleep(latencyWarmUp + d/2)
		errs <- latencyTraceSelf(filepath.Join(dir, "bench.trace"), 5*time.Second)
	}()
	return func() string {
		for range 3 {
			if err := <-errs; err != nil {
				b.Errorf("profile: %v", err)
			}
		}
		b.Logf("profiles of the bridge in %s", dir)
		var said []string
		for _, t := range []struct{ who, file string }{{"the bridge", "bridge.trace"}, {"the benchmark's process (the writers)", "bench.trace"}} {
			st, err := latencyReadTrace(filepath.Join(dir, t.file))
			if err != nil {
				b.Errorf("reading %s: %v", t.file, err)
				continue
			}
			said = append(said, fmt.Sprintf("in %s, %s", t.who, st))
		}
		return strings.Join(said, "; ")
	}
}

// latencyTraceSelf takes an execution trace of this process for d into
// file.
func latencyTraceSelf(file string, d time.Duration) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := trace.Start(f); err != nil {
		return err
	}
	time.Sleep(d)
	trace.Stop()
	return f.Close()
}
