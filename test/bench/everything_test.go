package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/metricstest"
)

// The watch-everything scenario's shape.
const (
	// everythingConfigMaps ConfigMaps of about 2 KiB, in
	// everythingNamespaces.
	everythingConfigMaps = 100_000
	everythingNamespaces = 10
	// everythingCRDs CRDs, with everythingCustom small objects each.
	everythingCRDs   = 20
	everythingCustom = 1_000
	// everythingWriters requests are in flight while objects are written.
	everythingWriters = 48
	// everythingRounds of the bridge and the factory, alternately, each
	// started fresh.
	everythingRounds = 2
	// apiServerSampling is how often the API server's RSS is read from a
	// start until its sync.
	apiServerSampling = 25 * time.Millisecond
	// After its restart, the API server is settled once its RSS has
	// changed by less than apiServerSettledWithin over apiServerSettle,
	// read every apiServerSettleEvery, at most apiServerSettleTimeout
	// after it is ready.
	apiServerSettle        = 3 * time.Second
	apiServerSettleEvery   = 250 * time.Millisecond
	apiServerSettledWithin = 0.02
	apiServerSettleTimeout = time.Minute
	// everythingSyncTimeout bounds a start's wait for its sync.
	everythingSyncTimeout = 5 * time.Minute
)

// BenchmarkWatchEverything measures a start with BRIDGE_RESOURCES=* on a
// cluster of 100,000 ConfigMaps of about 2 KiB (in 10 namespaces) and 20
// CRDs with 1,000 small objects each, on a control plane of its own. The
// baseline is a bare client-go dynamic informer factory
// (cmd/bareinformer -select '*') that caches the same resources, chosen
// the same way: from discovery, at their preferred versions, those with
// list and watch, minus the bridge's default exclusions and secrets. It
// has the bridge's default client rate limits (50 requests a second,
// bursts of 100) and otherwise client-go's defaults, under which its
// initial lists are streamed as watches (WatchListClient) as the bridge's
// are.
//
// The bridge (stdout sink, to /dev/null; a file checkpoint, new for each
// start) and the factory start alternately, each fresh, two rounds each.
// Measured per start: the time from the process's start until its full
// sync (the bridge's "ready" line, logged once every object is published
// and acknowledged; the factory's "synced" line, logged once every
// informer has synced); its VmRSS 3 s after, with no forced GC, and its
// VmHWM; the kube-apiserver's RSS just before the start and the highest
// of its readings every 25 ms until the sync; and the answers 429 Too
// Many Requests (the bridge's bridge_api_throttled_total, the factory's
// transport's count). Before each start the API server restarts (etcd and
// its data stay) and is left to settle, so that its figures are the
// start's own, and its caches of the ConfigMaps and custom resources are
// warmed, as in a cluster whose API server has run a while. A figure is the mean of the rounds; the note lists
// each.
func BenchmarkWatchEverything(b *testing.B) {
	setup := startProcessSetup(b, "github.com/kubebus/bridge/test/bench/cmd/bareinformer")
	ctx, cp, kc, dir := b.Context(), setup.cp, setup.kc, setup.dir
	rc := cp.RESTConfig()
	rc.QPS = -1
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	namespaces := namespaceNames("everything", everythingNamespaces)
	t0 := time.Now()
	crds, err := defineCRDs(ctx, rc, dyn, everythingCRDs)
	if err != nil {
		b.Fatal(err)
	}
	// The ConfigMaps and the custom objects are written at once: the API
	// server's CPU is the limit either way.
	if err := createNamespaces(ctx, kc, namespaces); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var cmErr, customErr error
	wg.Go(func() { _, cmErr = createConfigMaps(ctx, kc, namespaces, everythingConfigMaps, everythingWriters) })
	wg.Go(func() {
		customErr = createCustomObjects(ctx, dyn, crds, namespaces, everythingCustom, everythingWriters/4)
	})
	wg.Wait()
	if cmErr != nil || customErr != nil {
		b.Fatal(cmErr, customErr)
	}
	written := time.Since(t0)
	b.Logf("wrote %d ConfigMaps and %d custom objects of %d CRDs in %s", everythingConfigMaps, everythingCRDs*everythingCustom,
		everythingCRDs, written.Round(time.Second))
	bridgeBin, programs := setup.binaries(b)

	e := &everything{b: b, cp: cp, dyn: dyn, crds: crds, dir: dir, bridgeBin: bridgeBin, bareBin: programs[0]}
	var bridge, bare []everythingRun
	for round := range everythingRounds {
		bridge = append(bridge, e.bridge(round))
		bare = append(bare, e.factory(round))
	}
	e.record(bridge, bare, written)
	b.Logf("watch-everything scenario took %s", time.Since(setup.began).Round(time.Second))
}

// everything is the state the scenario's starts share.
type everything struct {
	b                  *testing.B
	cp                 *controlplane.ControlPlane
	dyn                dynamic.Interface
	crds               []customResource
	dir                string
	bridgeBin, bareBin string
	// resources are the resources the factory watched, as the bridge
	// names them; objects how many it cached, at its last start.
	resources []string
	objects   int
}

// everythingRun is what one start measured.
type everythingRun struct {
	sync time.Duration
	// seen is the process's memory 3 s after its sync.
	seen asSeen
	// apiBefore is the API server's RSS before the start, apiPeak the
	// highest of its readings until the sync, in bytes.
	apiBefore, apiPeak float64
	throttled          float64
}

// bridge starts the bridge with BRIDGE_RESOURCES=* and a new checkpoint,
// and measures it.
func (e *everything) bridge(round int) everythingRun {
	b := e.b
	env := []string{
		"KUBECONFIG=" + e.cp.KubeconfigPath(),
		"BRIDGE_RESOURCES=*",
		"BRIDGE_SINK=stdout",
		"BRIDGE_CHECKPOINT=file:" + filepath.Join(e.dir, fmt.Sprintf("checkpoint-%d.db", round)),
		"BRIDGE_CLUSTER_NAME=bench",
		"BRIDGE_METRICS_ADDR=127.0.0.1:0",
		"BRIDGE_LOG_FORMAT=json",
	}
	var r everythingRun
	var br *child
	r.apiBefore, r.apiPeak = e.sampleAPIServer(func() {
		br = startChild(b, "bridge", e.bridgeBin, env)
		r.sync = br.waitLog(b, "ready", everythingSyncTimeout).At.Sub(br.started)
	})
	r.seen = seenAfter(b, br, memorySeenAfter)
	s, err := metricstest.Scrape(br.metricsAddr(b))
	if err != nil {
		b.Fatal(err)
	}
	r.throttled = s.Sum("bridge_api_throttled_total")
	var watched []string
	for _, m := range s["bridge_informer_synced"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "resource" && m.GetGauge().GetValue() == 1 {
				watched = append(watched, l.GetValue())
			}
		}
	}
	slices.Sort(watched)
	if e.resources != nil && !slices.Equal(watched, e.resources) {
		b.Fatalf("the bridge watched %d resources, the factory %d: bridge %v, factory %v", len(watched), len(e.resources), watched, e.resources)
	}
	e.resources = watched
	if published := s.Sum("bridge_deltas_published_total"); published < everythingConfigMaps+everythingCRDs*everythingCustom {
		b.Fatalf("the bridge was ready having published %.0f deltas, fewer than the objects written", published)
	}
	br.stop(b)
	if testing.Verbose() {
		b.Logf("bridge, round %d: %s", round+1, r)
	}
	return r
}

// factory starts the bare informer factory on what * selects, and
// measures it.
func (e *everything) factory(round int) everythingRun {
	b := e.b
	var r everythingRun
	var c *child
	var synced logLine
	r.apiBefore, r.apiPeak = e.sampleAPIServer(func() {
		c = startChild(b, "informer factory", e.bareBin, []string{"KUBECONFIG=" + e.cp.KubeconfigPath()}, "-select", "*")
		synced = c.waitLog(b, "synced", everythingSyncTimeout)
		r.sync = synced.At.Sub(c.started)
	})
	r.seen = seenAfter(b, c, memorySeenAfter)
	var line struct {
		Objects   int
		Resources []string
	}
	if err := json.Unmarshal(synced.Raw, &line); err != nil {
		b.Fatalf("%s: %v: %s", c.name, err, synced.Raw)
	}
	slices.Sort(line.Resources)
	if e.resources != nil && !slices.Equal(line.Resources, e.resources) {
		b.Fatalf("the factory watched %d resources, the bridge %d: factory %v, bridge %v", len(line.Resources), len(e.resources), line.Resources, e.resources)
	}
	if line.Objects < everythingConfigMaps+everythingCRDs*everythingCustom {
		b.Fatalf("the factory synced with %d objects, fewer than the objects written", line.Objects)
	}
	e.resources, e.objects = line.Resources, line.Objects
	s, err := metricstest.Scrape(c.metricsAddr(b))
	if err != nil {
		b.Fatal(err)
	}
	r.throttled = s.Sum("bareinformer_api_throttled_total")
	c.stop(b)
	if testing.Verbose() {
		b.Logf("factory, round %d: %s", round+1, r)
	}
	return r
}

func (r everythingRun) String() string {
	return fmt.Sprintf("sync %.1f s, RSS %.0f MiB, VmHWM %.0f MiB, API server %.0f → peak %.0f MiB, %v answers 429",
		r.sync.Seconds(), mib(r.seen.RSS), mib(r.seen.Peak), mib(r.apiBefore), mib(r.apiPeak), r.throttled)
}

// sampleAPIServer restarts the API server and waits until its RSS has
// settled, then runs start while it reads its RSS every
// apiServerSampling, and returns the RSS before the start and the highest
// reading.
//
// The restart makes every start's figure its own: an API server that has
// served a start (or the writes before the first) keeps the heap it grew
// to, and would serve the next start from it without growing.
func (e *everything) sampleAPIServer(start func()) (before, peak float64) {
	b := e.b
	restartCtx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	err := e.cp.RestartAPIServer(restartCtx)
	cancel()
	if err != nil {
		b.Fatalf("restart API server: %v", err)
	}
	e.warm()
	pid := e.cp.APIServerPID()
	read := func() float64 { return procStatus(pid)["VmRSS"] }
	before = e.settled(read)
	if before == 0 {
		b.Fatalf("API server (pid %d): no VmRSS in /proc/%d/status", pid, pid)
	}
	peak = before
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(apiServerSampling)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
		peak = max(peak, read())
	}()
	start()
	return before, peak
}

// warm waits until the restarted API server's watch caches of the
// ConfigMaps and of every custom resource serve, as they do in a cluster
// whose API server has run a while: a list from the cache (resource
// version 0) with a label selector that matches nothing, repeated while it
// fails. The cache of a custom resource is made on its first request;
// until it holds the objects, lists and watches are answered 429, which
// would count against whichever side starts first.
func (e *everything) warm() {
	b := e.b
	resources := []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}}
	for _, c := range e.crds {
		resources = append(resources, c.GroupVersionResource)
	}
	deadline := time.Now().Add(apiServerSettleTimeout)
	for _, gvr := range resources {
		for {
			_, err := e.dyn.Resource(gvr).List(b.Context(), metav1.ListOptions{ResourceVersion: "0", LabelSelector: "bench/none=none"})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("API server's cache of %s not serving %s after its restart: %v", gvr.GroupResource(), apiServerSettleTimeout, err)
			}
			time.Sleep(apiServerSettleEvery)
		}
	}
}

// settled waits until the restarted API server's RSS (read) has changed
// by less than apiServerSettledWithin over apiServerSettle: it has filled
// its watch caches. It returns the last reading.
func (e *everything) settled(read func() float64) float64 {
	b := e.b
	deadline := time.Now().Add(apiServerSettleTimeout)
	var readings []float64
	for {
		rss := read()
		if rss == 0 {
			b.Fatal("API server: no VmRSS in /proc/<pid>/status")
		}
		readings = append(readings, rss)
		window := readings[max(0, len(readings)-int(apiServerSettle/apiServerSettleEvery)-1):]
		if len(readings) > int(apiServerSettle/apiServerSettleEvery) && slices.Max(window) <= (1+apiServerSettledWithin)*slices.Min(window) {
			return rss
		}
		if time.Now().After(deadline) {
			b.Fatalf("API server's RSS did not settle within %s after its restart: %.0f to %.0f MiB over the last %s",
				apiServerSettleTimeout, mib(slices.Min(window)), mib(slices.Max(window)), apiServerSettle)
		}
		time.Sleep(apiServerSettleEvery)
	}
}

// record turns the rounds into figures: the mean of each side's rounds.
func (e *everything) record(bridge, bare []everythingRun, written time.Duration) {
	b := e.b
	const (
		scenario = "Watch everything (BRIDGE_RESOURCES=*)"
		baseline = "client-go dynamic informer factory on the same resources"
	)
	shape := fmt.Sprintf("%s ConfigMaps of 2 KiB + %s custom objects", thousands(everythingConfigMaps), thousands(everythingCRDs*everythingCustom))
	mean := func(runs []everythingRun, v func(everythingRun) float64) float64 {
		var sum float64
		for _, r := range runs {
			sum += v(r)
		}
		return sum / float64(len(runs))
	}
	each := func(v func(everythingRun) float64, format string) string {
		var bs, fs []string
		for i := range bridge {
			bs = append(bs, fmt.Sprintf(format, v(bridge[i])))
			fs = append(fs, fmt.Sprintf(format, v(bare[i])))
		}
		return fmt.Sprintf("bridge %s, factory %s", strings.Join(bs, " / "), strings.Join(fs, " / "))
	}
	setup := fmt.Sprintf("The custom objects: %d CRDs × %s, small spec, in %d namespaces with the ConfigMaps. %d resources watched (%s objects cached by the factory), on a control plane of its own; %d rounds, the bridge then the factory, each started fresh (the bridge on a new file checkpoint, stdout sink to /dev/null), mean of the rounds. The objects took %s to write, not counted",
		everythingCRDs, thousands(everythingCustom), everythingNamespaces, len(e.resources), thousands(e.objects), len(bridge), written.Round(time.Second))
	figure := func(name, unit string, v func(everythingRun) float64, format, target string, met func(bridge, bare float64) bool, note string) {
		f := Figure{Scenario: scenario, Name: name + ", " + shape, Unit: unit,
			Bridge: mean(bridge, v), Baseline: mean(bare, v), BaselineName: baseline,
			Note: fmt.Sprintf("%s Each round: %s. %s.", note, each(v, format), setup)}
		if target != "" {
			f.Target, f.Met = target, met(f.Bridge, f.Baseline)
		}
		record(b, f)
	}
	figure("time to first full sync", "s", func(r everythingRun) float64 { return r.sync.Seconds() }, "%.1f", "", nil,
		`From the process's start until the bridge logged "ready: initial state published" (every object published and acknowledged) and the factory "synced" (every informer's HasSynced).`)
	figure(fmt.Sprintf("RSS %s after the sync, no forced GC", memorySeenAfter), "MiB", func(r everythingRun) float64 { return mib(r.seen.RSS) }, "%.0f",
		"≤ 0.15× baseline", func(br, f float64) bool { return br <= 0.15*f },
		"VmRSS from /proc/<pid>/status, with no scrape or GC before it.")
	figure("peak RSS (VmHWM) of the start", "MiB", func(r everythingRun) float64 { return mib(r.seen.Peak) }, "%.0f",
		"≤ 0.3× baseline", func(br, f float64) bool { return br <= 0.3*f },
		"VmHWM from /proc/<pid>/status, read with the RSS.")
	figure("API-server peak RSS during the start", "MiB", func(r everythingRun) float64 { return mib(r.apiPeak) }, "%.0f",
		"≤ 1× baseline", func(br, f float64) bool { return br <= f },
		fmt.Sprintf("Highest VmRSS of kube-apiserver read every %s from the start until the sync, nothing subtracted. Before each start it was restarted, its caches of the ConfigMaps and custom resources warmed (a list from the cache that matches nothing, until it is served), and left until its RSS changed by less than %.0f%% over %s (its watch caches filled); its VmRSS then, just before the start: %s MiB.",
			apiServerSampling, 100*apiServerSettledWithin, apiServerSettle, each(func(r everythingRun) float64 { return mib(r.apiBefore) }, "%.0f")))
	figure("answers 429 Too Many Requests during the start", "count", func(r everythingRun) float64 { return r.throttled }, "%.0f", "", nil,
		"The bridge's bridge_api_throttled_total, the factory's count from a wrapping round tripper, each retry counted, read after the memory.")
}
