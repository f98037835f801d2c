package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/metricstest"
)

// reconcileRig runs the bridge on one bus and measures its passes, LISTs
// of the same objects and its restarts, one at a time: each is measured
// over a window in which the benchmark sends the API server nothing, after
// a quiet window of its own.
type reconcileRig struct {
	b       *testing.B
	bus     string // the bus's name in figures
	kc      kubernetes.Interface
	bin     string   // the bridge
	env     []string // the bridge's
	lister  *lister
	shape   reconcileShape
	busSent func() int64 // bytes the bus has sent the bridge
	use     *usageSampler

	br         *child
	ready      time.Time // when br was ready: its passes are due every reconcileInterval from then
	passesSeen int       // pass lines of br taken so far
	// lastBusy is when the benchmark last sent the API server a request
	// (a LIST, a scrape, the bridge's restart), and requests what the API
	// server had served of ConfigMaps then.
	lastBusy    time.Time
	requests    apiRequests
	longestList time.Duration
}

// apiUse is what a window cost the API server.
type apiUse struct {
	// raw is its CPU time over the window, idle its CPU time over the
	// quiet window before, scaled to the window's length, and net their
	// difference.
	raw, idle, net time.Duration
	// after is what it used over the quiet window after, less idle over
	// as long: work the window left behind, such as collecting the
	// garbage of an answer. Not measured for restarts.
	after time.Duration
}

// apiUseOf measures the API server's CPU over [start, end], less its idle
// CPU over the quiet window before start; with after, it measures the
// quiet window after end too, waiting it out.
func (r *reconcileRig) apiUseOf(start, end time.Time, after bool) (apiUse, usage) {
	b := r.b
	u, window := r.use.between(b, start, end)
	idle, idleWindow := r.use.between(b, start.Add(-reconcileQuiet), start)
	a := apiUse{raw: u.api, idle: scaled(idle.api, idleWindow, window), net: netCPU(u, window, idle, idleWindow)}
	if after {
		time.Sleep(time.Until(end.Add(reconcileQuiet)))
		v, w := r.use.between(b, end, end.Add(reconcileQuiet))
		a.after = v.api - scaled(idle.api, idleWindow, w)
	}
	return a, u
}

// passResult is one reconcile pass.
type passResult struct {
	took      time.Duration // as the bridge logged it
	msg       string        // the line it logged
	api       apiUse
	bridgeCPU time.Duration
	busBytes  int64
	// requests is the API server's requests for ConfigMaps other than
	// WATCH from before the pass's quiet window until after it; byVerb
	// says which.
	requests float64
	byVerb   string
}

// listResult is one LIST of every ConfigMap.
type listResult struct {
	took       time.Duration
	api        apiUse
	wire, body int64 // bytes read on the wire, and of JSON
	items      int
	requests   float64
	byVerb     string
}

// restartResult is one restart of the bridge on its checkpoint.
type restartResult struct {
	// took is from its start until it logged the initial state published;
	// busRead until it logged how the bus and the checkpoint compared.
	took, busRead time.Duration
	api           apiUse
	bridgeCPU     time.Duration // of the process, from its start until ready
	busBytes      int64
}

// start starts the bridge and waits until it is ready.
func (r *reconcileRig) start() logLine {
	b := r.b
	r.br = startChild(b, "bridge ("+r.bus+")", r.bin, r.env)
	r.use.watchBridge(r.br.cmd.Process.Pid)
	ready := r.br.waitLog(b, "ready", 15*time.Minute)
	r.ready = loggedAt(b, ready)
	r.passesSeen = 0
	return ready
}

// bridgeMetrics scrapes the bridge's /metrics.
func (r *reconcileRig) bridgeMetrics() metricstest.Samples {
	s, err := metricstest.Scrape(r.br.metricsAddr(r.b))
	if err != nil {
		r.b.Fatal(err)
	}
	return s
}

// scrape reads what the API server has served of ConfigMaps, and returns
// what it served since the last scrape.
func (r *reconcileRig) scrape() (float64, string) {
	now := scrapeAPIRequests(r.b, r.kc)
	n, by := now.since(r.requests)
	r.requests, r.lastBusy = now, time.Now()
	return n, by
}

// quiet waits out the quiet window after the benchmark's last request.
func (r *reconcileRig) quiet() {
	time.Sleep(time.Until(r.lastBusy.Add(reconcileQuiet)))
}

// nextPass is when the bridge's next pass is due after t: its passes run
// every reconcileInterval from its ready.
func (r *reconcileRig) nextPass(t time.Time) time.Time {
	n := t.Sub(r.ready)/reconcileInterval + 1
	return r.ready.Add(n * reconcileInterval)
}

// clearOfPasses makes sure that what the benchmark is about to do, which
// takes up to need after the quiet window, ends at least a quiet window
// before the next pass is due: otherwise it lets that pass run first.
func (r *reconcileRig) clearOfPasses(need time.Duration) {
	start := r.lastBusy.Add(reconcileQuiet)
	if now := time.Now(); now.After(start) {
		start = now
	}
	if !start.Add(need + reconcileQuiet + time.Second).After(r.nextPass(start)) {
		return
	}
	if testing.Verbose() {
		r.b.Logf("%s: letting the pass due at %s run first", r.bus, r.nextPass(start).Format(time.StampMilli))
	}
	r.br.waitLogN(r.b, "reconcile:", r.passesSeen+1, reconcileInterval+10*time.Minute)
	r.passesSeen++
	r.scrape()
}

// pass waits for the bridge's next pass and measures it. A pass that ran
// within a quiet window of the benchmark's requests is passed over.
func (r *reconcileRig) pass() passResult {
	b := r.b
	for skipped := 0; ; skipped++ {
		line := r.br.waitLogN(b, "reconcile:", r.passesSeen+1, reconcileInterval+10*time.Minute)
		r.passesSeen++
		var rec struct{ Took time.Duration }
		if err := json.Unmarshal(line.Raw, &rec); err != nil || rec.Took <= 0 {
			b.Fatalf("%s: a reconcile line without took: %s", r.bus, line.Raw)
		}
		end := loggedAt(b, line)
		start := end.Add(-rec.Took)
		if start.Add(-reconcileQuiet).Before(r.lastBusy) {
			if skipped == 2 {
				b.Fatalf("%s: three passes in a row ran within %s of the benchmark's own requests; raise reconcileInterval", r.bus, reconcileQuiet)
			}
			if testing.Verbose() {
				b.Logf("%s: passing over a pass that began %s after the benchmark's last request", r.bus, start.Sub(r.lastBusy).Round(time.Millisecond))
			}
			r.scrape()
			continue
		}
		p := passResult{took: rec.Took, msg: line.Msg}
		var u usage
		p.api, u = r.apiUseOf(start, end, true)
		p.bridgeCPU, p.busBytes = u.bridge, u.busSent
		p.requests, p.byVerb = r.scrape()
		return p
	}
}

// list measures one LIST of every ConfigMap.
func (r *reconcileRig) list() listResult {
	b := r.b
	need := 30 * time.Second
	if r.longestList > 0 {
		need = 2 * r.longestList
	}
	r.clearOfPasses(need)
	r.quiet()
	start := time.Now()
	body, wire := r.lister.list(b)
	end := time.Now()
	l := listResult{took: end.Sub(start), wire: wire, body: int64(len(body))}
	r.longestList = max(r.longestList, l.took)
	l.api, _ = r.apiUseOf(start, end, true)
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &list); err != nil {
		b.Fatalf("LIST: %v", err)
	}
	if l.items = len(list.Items); l.items != r.shape.objects {
		b.Fatalf("LIST: %d ConfigMaps, want %d", l.items, r.shape.objects)
	}
	l.requests, l.byVerb = r.scrape()
	return l
}

// restart stops the bridge, starts it again on its checkpoint and
// measures it until it is ready.
func (r *reconcileRig) restart() restartResult {
	b := r.b
	r.clearOfPasses(0)
	r.quiet()
	stopped := time.Now()
	idle, idleWindow := r.use.between(b, stopped.Add(-reconcileQuiet), stopped)
	r.br.stop(b)
	ready := r.start()
	rs := restartResult{took: ready.At.Sub(r.br.started)}
	rs.bridgeCPU = procCPUTime(b, r.br.cmd.Process.Pid)
	u, window := r.use.between(b, r.br.started, ready.At)
	rs.api = apiUse{raw: u.api, idle: scaled(idle.api, idleWindow, window), net: netCPU(u, window, idle, idleWindow)}
	rs.busBytes = u.busSent
	for _, msg := range []string{"the bus agrees with the checkpoint", "the checkpoint and the bus disagree"} {
		if line, ok := r.br.logged(msg); ok {
			rs.busRead = line.At.Sub(r.br.started)
		}
	}
	r.scrape()
	return rs
}

// loggedAt is the time a JSON log line gives itself, or when the
// benchmark read it when it gives none.
func loggedAt(b *testing.B, line logLine) time.Time {
	b.Helper()
	var rec struct{ Time time.Time }
	if err := json.Unmarshal(line.Raw, &rec); err != nil || rec.Time.IsZero() {
		return line.At
	}
	return rec.Time
}

// apiRequests are the API server's apiserver_request_total for ConfigMaps,
// by verb.
type apiRequests map[string]float64

// scrapeAPIRequests reads the API server's apiserver_request_total for
// ConfigMaps.
func scrapeAPIRequests(b *testing.B, kc kubernetes.Interface) apiRequests {
	b.Helper()
	raw, err := kc.CoreV1().RESTClient().Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").DoRaw(b.Context())
	if err != nil {
		b.Fatalf("API server's /metrics: %v", err)
	}
	s, err := metricstest.Parse(bytes.NewReader(raw))
	if err != nil {
		b.Fatalf("API server's /metrics: %v", err)
	}
	out := apiRequests{}
	for _, m := range s["apiserver_request_total"].GetMetric() {
		var resource, verb string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "resource":
				resource = l.GetValue()
			case "verb":
				verb = l.GetValue()
			}
		}
		if resource == "configmaps" {
			out[verb] += m.GetCounter().GetValue()
		}
	}
	return out
}

// since is how many requests other than WATCH were served since prev, and
// by verb (WATCH included).
func (a apiRequests) since(prev apiRequests) (float64, string) {
	var n float64
	var by []string
	for _, verb := range slices.Sorted(maps.Keys(a)) {
		d := a[verb] - prev[verb]
		if d == 0 {
			continue
		}
		if verb != "WATCH" {
			n += d
		}
		by = append(by, fmt.Sprintf("%s %.0f", verb, d))
	}
	if len(by) == 0 {
		return 0, "none"
	}
	return n, strings.Join(by, ", ")
}
