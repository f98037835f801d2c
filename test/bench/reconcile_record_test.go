package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// reconcileResult is what the rounds on one bus measured.
type reconcileResult struct {
	bus       string
	shape     reconcileShape
	firstSync time.Duration // the bridge's first start, publishing every object
	passes    []passResult
	lists     []listResult
	restarts  []restartResult
}

// agreedMsg is the line a pass that found nothing to repair logs.
const agreedMsg = "reconcile: the bus agrees with the cluster"

// record turns the rounds into figures: a pass next to a LIST, for what
// it costs the API server, and next to the bridge's restart, for its time
// and the bridge's CPU.
func (r reconcileResult) record(b *testing.B) {
	b.Helper()
	const scenario = "Reconcile pass"
	shape := fmt.Sprintf("%s ConfigMaps of 2 KiB", thousands(r.shape.written))
	list := fmt.Sprintf("one LIST of the same %s ConfigMaps", thousands(r.shape.objects))
	restart := "the bridge's restart on its checkpoint"
	objects := fmt.Sprintf("%s ConfigMaps watched (%s of %.0f B on average as JSON, managedFields included, plus %d the cluster had already), all published by the bridge's first start (%.1f s) and unchanged since",
		thousands(r.shape.objects), thousands(r.shape.written), r.shape.size, r.shape.objects-r.shape.written, r.firstSync.Seconds())
	busBytes := "bytes the NATS server sent the bridge's connection (its connz out_bytes, protocol and JetStream API answers included); the pass reads the last message of each subject with headers only"
	if r.bus == "Kafka" {
		busBytes = "bytes kfake's three brokers wrote to their connections (a counting listener; the bridge is their only client); the pass reads the compacted topic to its end, values included, since a fetch cannot leave them out. kfake does not compact, but each object was written once, so the topic holds one record per object"
	}
	disagreed := 0
	for _, p := range r.passes {
		if p.msg != agreedMsg {
			disagreed++
		}
	}
	rounds := fmt.Sprintf("%d rounds, each a pass, a LIST (alternating which went first) and a restart, each after a quiet window; the figure is the median", len(r.passes))

	pass := func(f func(passResult) float64) []float64 { return collect(r.passes, f) }
	lst := func(f func(listResult) float64) []float64 { return collect(r.lists, f) }
	rst := func(f func(restartResult) float64) []float64 { return collect(r.restarts, f) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

	passCPU, listCPU := pass(func(p passResult) float64 { return ms(p.api.net) }), lst(func(l listResult) float64 { return ms(l.api.net) })
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("%s, API-server CPU of one pass, %s", r.bus, shape), Unit: "ms",
		Bridge: median(passCPU), Baseline: median(listCPU), BaselineName: list,
		Target: "< baseline, every round", Met: slices.Max(passCPU) < slices.Min(listCPU),
		Note: fmt.Sprintf("utime+stime of kube-apiserver (/proc/<pid>/stat, in ticks of 10 ms, read every %s) over the pass's window (the took= of the line the bridge logs at its end, before that line's time), less what it used over the %s before, scaled to the window's length; a LIST the same way, over its request. %s. Pass: %s ms net (raw %s, idle %s); in the %s after it, %s ms more than idle. LIST: %s ms net (raw %s, idle %s); in the %s after it (collecting its garbage, among others), %s ms more than idle. The API server's idle CPU varies by tens of ms from one window of a second to the next, and its CPU time is counted in ticks, so a pass's net figure is 0 within that noise, negative ones included: raw, a pass's window held at most %.0f ms. The LIST: GET /api/v1/configmaps as JSON, unpaginated, at the latest resourceVersion, gzip offered as client-go's transport does. %s. BRIDGE_RECONCILE_INTERVAL=%s.",
			usageEvery, reconcileQuiet, rounds,
			spread(passCPU, "%.0f"), joined(pass(func(p passResult) float64 { return ms(p.api.raw) }), "%.0f"), joined(pass(func(p passResult) float64 { return ms(p.api.idle) }), "%.0f"),
			reconcileQuiet, joined(pass(func(p passResult) float64 { return ms(p.api.after) }), "%.0f"),
			spread(listCPU, "%.0f"), joined(lst(func(l listResult) float64 { return ms(l.api.raw) }), "%.0f"), joined(lst(func(l listResult) float64 { return ms(l.api.idle) }), "%.0f"),
			reconcileQuiet, joined(lst(func(l listResult) float64 { return ms(l.api.after) }), "%.0f"),
			slices.Max(pass(func(p passResult) float64 { return ms(p.api.raw) })), objects, reconcileInterval),
	})

	passReqs := pass(func(p passResult) float64 { return p.requests })
	var passVerbs, listVerbs []string
	for i := range r.passes {
		passVerbs = append(passVerbs, r.passes[i].byVerb)
		listVerbs = append(listVerbs, r.lists[i].byVerb)
	}
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("%s, API-server requests of one pass, %s", r.bus, shape), Unit: "requests",
		Bridge: median(passReqs), Baseline: median(lst(func(l listResult) float64 { return l.requests })), BaselineName: list,
		Target: "0 when the bus agrees", Met: slices.Max(passReqs) == 0 && disagreed == 0,
		Note: fmt.Sprintf("The API server's apiserver_request_total for ConfigMaps, every verb but WATCH (the bridge reopens its watch about every minute, pass or not), from before the quiet window ahead of the pass or LIST until after the quiet window behind it. %d of %d passes logged %q. Per pass: %s. Per LIST: %s.",
			len(r.passes)-disagreed, len(r.passes), agreedMsg, strings.Join(passVerbs, "; "), strings.Join(listVerbs, "; ")),
	})

	passBytes, wire := pass(func(p passResult) float64 { return mib(float64(p.busBytes)) }), lst(func(l listResult) float64 { return mib(float64(l.wire)) })
	perObject := median(pass(func(p passResult) float64 { return float64(p.busBytes) })) / float64(r.shape.objects)
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("%s, bytes read from the bus by one pass, %s", r.bus, shape), Unit: "MiB",
		Bridge: median(passBytes), Baseline: median(wire), BaselineName: list + ", on the wire",
		Note: fmt.Sprintf("Over the pass's window, %s. Pass: %s MiB, %.0f B per object. LIST: %s MiB read on the wire (TLS, gzip as the API server chose), %s MiB of JSON once decompressed. A restart read %s MiB from the bus.",
			busBytes, spread(passBytes, "%.1f"), perObject, spread(wire, "%.1f"), joined(lst(func(l listResult) float64 { return mib(float64(l.body)) }), "%.1f"),
			joined(rst(func(s restartResult) float64 { return mib(float64(s.busBytes)) }), "%.1f")),
	})

	passTook, restartTook := pass(func(p passResult) float64 { return p.took.Seconds() }), rst(func(s restartResult) float64 { return s.took.Seconds() })
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("%s, time of one pass, %s", r.bus, shape), Unit: "s",
		Bridge: median(passTook), Baseline: median(restartTook), BaselineName: restart,
		Note: fmt.Sprintf("Pass: took= as the bridge logs it, from taking what it knows, through waiting for the pipeline to drain, reading the bus and comparing: %s s. Restart: from starting the process until it logged \"ready: initial state published\" (the bus read and merged with the checkpoint, the list compared with it, nothing to publish): %s s, of which until it logged how the bus and the checkpoint compared %s s; the API server's CPU for it %s ms net. LIST: %s s.",
			spread(passTook, "%.2f"), spread(restartTook, "%.2f"), joined(rst(func(s restartResult) float64 { return s.busRead.Seconds() }), "%.2f"),
			joined(rst(func(s restartResult) float64 { return ms(s.api.net) }), "%.0f"), joined(lst(func(l listResult) float64 { return l.took.Seconds() }), "%.2f")),
	})

	passBridge, restartBridge := pass(func(p passResult) float64 { return ms(p.bridgeCPU) }), rst(func(s restartResult) float64 { return ms(s.bridgeCPU) })
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("%s, bridge CPU of one pass, %s", r.bus, shape), Unit: "ms",
		Bridge: median(passBridge), Baseline: median(restartBridge), BaselineName: restart,
		Note: fmt.Sprintf("utime+stime of the bridge's process (ticks of 10 ms) over the pass's window, and over the restart from its start until ready. Pass: %s ms. Restart: %s ms.",
			spread(passBridge, "%.0f"), spread(restartBridge, "%.0f")),
	})
}

// collect maps f over xs.
func collect[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// spread writes xs as "a, b, c (median m, range lo to hi)".
func spread(xs []float64, format string) string {
	return fmt.Sprintf("%s (median "+format+", range "+format+" to "+format+")", joined(xs, format), median(xs), slices.Min(xs), slices.Max(xs))
}

// joined writes xs in order, comma-separated.
func joined(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}
