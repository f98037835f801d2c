package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The replica's figures: Bridge is the replica's value, Baseline the
// kube-apiserver's (or the bare informer's, for memory), from the same run.
const (
	replicaBaseline     = "kube-apiserver, same client"
	replicaClient       = "client-go's REST client, JSON, TLS with the same certificate, key and bearer token on both sides (the replica serves the API server's own certificate), gzip offered as Go's transport offers it"
	replicaMemScenario  = "Replica: memory per object held"
	replicaListScenario = "Replica: list latency"
	replicaWatchScen    = "Replica: watch fan-out"
)

func (r *replicaRun) recordMemory(m replicaMemory) {
	b := r.b
	held := float64(r.held)
	note := fmt.Sprintf("read from /proc/<pid>/status %s after the cache synced, with no forced GC; %s ConfigMaps held (%s). The replica's cache filled on its first request (a LIST with limit=1), which was answered after %s; the bare client-go dynamic informer (all namespaces, objects cached whole, no transform) synced from the API server in %s. Whole: replica %.0f MiB VmHWM, %.0f MiB VmRSS (%.0f MiB VmRSS before its first request, its cache empty); bare informer %.0f MiB VmHWM, %.0f MiB VmRSS. The baseline is the least a Go client holding the same objects to answer reads from memory needs; the kube-apiserver's share of its memory for them cannot be told apart from the rest (its watch cache holds every resource). The process's fixed memory is counted in, on both sides",
		memorySeenAfter, thousands(r.held), r.objectsShape(), m.replicaSync.Round(time.Millisecond), m.bareSync.Round(time.Millisecond),
		mib(m.replica.Peak), mib(m.replica.RSS), mib(m.before), mib(m.bare.Peak), mib(m.bare.RSS))
	record(b, Figure{
		Scenario: replicaMemScenario, Name: fmt.Sprintf("RSS %s after sync ÷ ConfigMaps held", memorySeenAfter), Unit: "B/object",
		Bridge: m.replica.RSS / held, Baseline: m.bare.RSS / held, BaselineName: "bare client-go dynamic informer",
		Note: "VmRSS, as `top` shows it, " + note + ".",
	})
	record(b, Figure{
		Scenario: replicaMemScenario, Name: "peak RSS (VmHWM) of the sync ÷ ConfigMaps held", Unit: "B/object",
		Bridge: m.replica.Peak / held, Baseline: m.bare.Peak / held, BaselineName: "bare client-go dynamic informer",
		Note: "VmHWM, the most the process held at once since its start: what a pod's memory limit must hold, " + note + ".",
	})
}

func (r *replicaRun) recordLists(lists [2][]listTimes) {
	b := r.b
	api, rep := lists[0], lists[1]
	for _, kind := range []struct {
		name  string
		times func(listTimes) []time.Duration
		bytes func(listTimes) int64
	}{
		{"whole LIST", func(t listTimes) []time.Duration { return t.whole }, func(t listTimes) int64 { return t.wholeBytes }},
		{fmt.Sprintf("paged LIST (limit %d, to the end)", replicaPageSize), func(t listTimes) []time.Duration { return t.paged }, func(t listTimes) int64 { return t.pagedBytes }},
	} {
		pooled := func(ts []listTimes) []time.Duration {
			var all []time.Duration
			for _, t := range ts {
				all = append(all, kind.times(t)...)
			}
			return slices.Sorted(slices.Values(all))
		}
		wire := func(ts []listTimes) float64 {
			return median(collect(ts, func(t listTimes) float64 { return float64(kind.bytes(t)) })) / (1 << 20)
		}
		for _, q := range []float64{0.5, 0.99} {
			rounds := func(ts []listTimes) string {
				return spread(collect(ts, func(t listTimes) float64 {
					return latencyMillis(latencyPercentile(slices.Sorted(slices.Values(kind.times(t))), q))
				}), "%.0f")
			}
			f := Figure{
				Scenario: replicaListScenario, Name: fmt.Sprintf("%s of %s ConfigMaps, p%.0f", kind.name, thousands(len(r.refs)), q*100), Unit: "ms",
				Bridge: latencyMillis(latencyPercentile(pooled(rep), q)), Baseline: latencyMillis(latencyPercentile(pooled(api), q)), BaselineName: replicaBaseline,
				Note: fmt.Sprintf("%d lists per side (%d rounds of %d, alternating which side goes first, after %d unmeasured), each timed from its request until the last byte of its last answer was read (only the list's metadata decoded); %s (%s); one connection per side, kept. p%.0f per round, ms: replica %s; kube-apiserver %s. Bytes on the wire per list: replica %.1f MiB, kube-apiserver %.1f MiB. %s.",
					replicaListRounds*replicaListsPerRound, replicaListRounds, replicaListsPerRound, replicaListWarmUp, replicaClient, r.negotiated, q*100,
					rounds(rep), rounds(api), wire(rep), wire(api), r.objectsShape()),
			}
			if q == 0.5 {
				f.Target, f.Met = "≤ 1× baseline", f.Bridge <= f.Baseline
			} else {
				f.Note += fmt.Sprintf(" No target: the p99 of %d lists on a shared machine is close to their slowest.", replicaListRounds*replicaListsPerRound)
			}
			if parts := r.wholeParts[1]; kind.name == "whole LIST" && parts > 1 {
				// A client that asks once, as client-go's List and kubectl
				// get without --chunk-size do, gets part of the objects.
				f.Met = false
				f.Note += fmt.Sprintf(" The replica answered a LIST without limit in %d parts, with a continue token (the kube-apiserver in %d): a client that asks once, as client-go's List does, would get only the first part; the time is the whole, every part followed, and the target is held missed until it answers in one.", parts, r.wholeParts[0])
			}
			record(b, f)
		}
	}
}

func (r *replicaRun) recordFanOut(runs []watchRun, counts []int) {
	b := r.b
	of := func(side, n int) []watchRun {
		var out []watchRun
		for _, w := range runs {
			if w.side == side && w.n == n {
				out = append(out, w)
			}
		}
		return out
	}
	delays := func(ws []watchRun) []time.Duration {
		var all []time.Duration
		for _, w := range ws {
			all = append(all, w.delays...)
		}
		return slices.Sorted(slices.Values(all))
	}
	secs := func(ws []watchRun, f func(watchRun) time.Duration) []float64 {
		return collect(ws, func(w watchRun) float64 { return f(w).Seconds() })
	}
	api := func(w watchRun) time.Duration { return w.api }
	lo, hi := counts[0], counts[len(counts)-1]
	how := fmt.Sprintf("N watches of the namespace's ConfigMaps in one child process (cmd/watchers), each with its own client and connection (%s; the list clients' %s), all from one LIST's resourceVersion; once all were watching and %s had passed, %d changes (a merge patch of one annotation on one ConfigMap in turn) one every %s; a change's delay runs from its write's start to the moment the last of the N watchers read its event. %d rounds, each running every N on both sides, alternating which side goes first. Through the replica the path is kube-apiserver → bridge → NATS JetStream → replica → watchers; the bridge runs only during the replica's runs. %s",
		replicaClient, r.negotiated, replicaWatchSettle, replicaChanges, replicaChangeEvery, replicaWatchRounds, r.objectsShape())
	var extended []string
	for _, w := range runs {
		if w.extended {
			extended = append(extended, fmt.Sprintf("%s %s round %d (%.1f s)", r.sides[w.side].name, watchersOf(w.n), w.round, w.window.Seconds()))
		}
	}
	window := fmt.Sprintf("Each run's window: from the first change's write until %s after the last's", replicaWatchTail)
	if len(extended) > 0 {
		window += ", or until the last change reached its last watcher when that was later: " + strings.Join(extended, ", ")
	}

	for _, n := range counts {
		rep, dir := of(1, n), of(0, n)
		for _, q := range []float64{0.5, 0.99} {
			rounds := func(ws []watchRun) string {
				return spread(collect(ws, func(w watchRun) float64 {
					return latencyMillis(latencyPercentile(slices.Sorted(slices.Values(w.delays)), q))
				}), "%.1f")
			}
			f := Figure{
				Scenario: replicaWatchScen, Name: fmt.Sprintf("a change's delay to the last of %s, p%.0f", watchersOf(n), q*100), Unit: "ms",
				Bridge: latencyMillis(latencyPercentile(delays(rep), q)), Baseline: latencyMillis(latencyPercentile(delays(dir), q)), BaselineName: replicaBaseline,
				Note: fmt.Sprintf("%d changes per side. p%.0f per round, ms: replica %s; kube-apiserver %s. Time to establish the %s (process start until every watch's answer began), s: replica %s; kube-apiserver %s. %s.",
					replicaWatchRounds*replicaChanges, q*100, rounds(rep), rounds(dir), watchersOf(n),
					spread(secs(rep, func(w watchRun) time.Duration { return w.established }), "%.1f"),
					spread(secs(dir, func(w watchRun) time.Duration { return w.established }), "%.1f"), how),
			}
			switch {
			case q == 0.5 && n == lo:
				f.Target, f.Met = "≤ 1× baseline", f.Bridge <= f.Baseline
			case q == 0.5 && n == hi:
				f.Target, f.Met = "≤ 0.5× baseline", f.Bridge <= 0.5*f.Baseline
			}
			record(b, f)
		}
		record(b, Figure{
			Scenario: replicaWatchScen, Name: "API-server CPU, " + watchersOf(n), Unit: "s",
			Bridge: median(secs(rep, api)), Baseline: median(secs(dir, api)), BaselineName: replicaBaseline,
			Note: fmt.Sprintf("utime+stime of kube-apiserver (/proc/<pid>/stat, ticks of 10 ms) over the run's window, median of %d rounds; it serves the %d writes on both sides, and through the replica the bridge's one watch. Per round, s: through the replica %s; direct %s. %s. Through the replica, the other processes on the path, s: replica %s, bridge %s, benchmark process (the writes and the NATS server) %s; direct: benchmark process (the writes) %s. The watchers' own process: through the replica %s, direct %s.",
				replicaWatchRounds, replicaChanges, spread(secs(rep, api), "%.2f"), spread(secs(dir, api), "%.2f"), window,
				spread(secs(rep, func(w watchRun) time.Duration { return w.replica }), "%.2f"),
				spread(secs(rep, func(w watchRun) time.Duration { return w.bridge }), "%.2f"),
				spread(secs(rep, func(w watchRun) time.Duration { return w.bench }), "%.2f"),
				spread(secs(dir, func(w watchRun) time.Duration { return w.bench }), "%.2f"),
				spread(secs(rep, func(w watchRun) time.Duration { return w.watchers }), "%.2f"),
				spread(secs(dir, func(w watchRun) time.Duration { return w.watchers }), "%.2f")),
		})
	}

	growth := func(side int) float64 {
		l := median(secs(of(side, lo), api))
		if l == 0 {
			return 0
		}
		return median(secs(of(side, hi), api)) / l
	}
	repGrowth := growth(1)
	record(b, Figure{
		Scenario: replicaWatchScen, Name: fmt.Sprintf("API-server CPU growth from %s to %s", watchersOf(lo), watchersOf(hi)), Unit: "×",
		Bridge: repGrowth, Baseline: growth(0), BaselineName: replicaBaseline,
		Target: "bridge ≤ 1.1×", Met: repGrowth > 0 && repGrowth <= 1.1,
		Note: fmt.Sprintf("kube-apiserver's CPU time over the window (median of %d rounds) with %d watchers ÷ with %d, through the replica and direct. %s.", replicaWatchRounds, hi, lo, window),
	})

	path := func(w watchRun) time.Duration { return w.api + w.replica + w.bridge + w.bench }
	rep, dir := of(1, hi), of(0, hi)
	record(b, Figure{
		Scenario: replicaWatchScen, Name: "CPU of every server on the path, " + watchersOf(hi), Unit: "s",
		Bridge: median(secs(rep, path)), Baseline: median(secs(dir, path)), BaselineName: "kube-apiserver alone, same client",
		Note: fmt.Sprintf("utime+stime over the run's window, median of %d rounds: through the replica, kube-apiserver + bridge + replica + the benchmark process (the writes and the NATS server it holds); direct, kube-apiserver + the benchmark process (the writes). Per round, s: %s; direct %s. The replica's VmRSS at the window's end, MiB: %s; its VmHWM by the end of the scenario %.0f MiB. The kube-apiserver's VmRSS at the window's end, MiB: through the replica %s; direct %s.",
			replicaWatchRounds, spread(secs(rep, path), "%.2f"), spread(secs(dir, path), "%.2f"),
			perWatchers(counts, func(n int) string {
				return spread(collect(of(1, n), func(w watchRun) float64 { return mib(w.replicaRSS) }), "%.0f")
			}),
			mib(slices.MaxFunc(runs, func(a, b watchRun) int { return int(a.replicaHWM - b.replicaHWM) }).replicaHWM),
			spread(collect(rep, func(w watchRun) float64 { return mib(w.apiRSS) }), "%.0f"),
			spread(collect(dir, func(w watchRun) float64 { return mib(w.apiRSS) }), "%.0f")),
	})
}

// perWatchers writes what(n) for every n, labelled.
func perWatchers(counts []int, what func(n int) string) string {
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = fmt.Sprintf("%s: %s", watchersOf(n), what(n))
	}
	return strings.Join(parts, "; ")
}
