package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The fan-out part's shape.
const (
	// replicaWatchRounds rounds, each running every N on both sides, the
	// side that goes first alternating.
	replicaWatchRounds = 3
	// replicaChanges changes per run, one every replicaChangeEvery: paced,
	// so that every run's window has the same length and the same writes,
	// whatever its N and side.
	replicaChanges     = 50
	replicaChangeEvery = 200 * time.Millisecond
	// replicaWatchSettle is how long the watchers are left alone once all
	// are watching, before the first change: their set-up is not counted.
	replicaWatchSettle = 3 * time.Second
	// replicaWatchTail is how long the window lasts after the last change
	// is written, at the least: long enough for it to reach every watcher
	// on both sides. A run whose last change arrives later is measured to
	// that arrival, and says so.
	replicaWatchTail = 2 * time.Second
	// replicaChangeMarker is the annotation that numbers a change.
	replicaChangeMarker = "bench.kubebus.io/change"
)

// watchRun is what one fan-out run measured.
type watchRun struct {
	side, n, round int
	// delays are each change's, from its write's start until the last
	// watcher received it.
	delays []time.Duration
	window time.Duration
	// extended says the window lasted past its planned length, to the
	// last change's arrival.
	extended bool
	// CPU time over the window: the kube-apiserver's; the replica's and
	// the bridge's (through the replica; the bridge is stopped during the
	// direct runs); the benchmark process's (the writes, and the NATS
	// server it holds); the watchers' process's.
	api, replica, bridge, bench, watchers time.Duration
	// Memory at the window's end, in bytes: the replica's VmRSS and VmHWM,
	// the kube-apiserver's VmRSS, the watchers' process's VmHWM.
	replicaRSS, replicaHWM, apiRSS, watchersHWM float64
	// established is the time from the watchers' process's start until
	// every watch's answer had begun.
	established time.Duration
}

// fanOut runs every N on both sides, replicaWatchRounds times, and
// returns the runs.
func (r *replicaRun) fanOut(counts []int) []watchRun {
	b := r.b
	r.stopBridge() // started again for each run through the replica
	var runs []watchRun
	for round := range replicaWatchRounds {
		for _, n := range counts {
			for i := range 2 {
				w := r.watchRun((round+i)%2, n)
				w.round = round
				runs = append(runs, w)
				if testing.Verbose() {
					s := slices.Sorted(slices.Values(w.delays))
					b.Logf("fan-out round %d, %s, %s: delay p50 %s p99 %s; window %.1f s; CPU s: kube-apiserver %.2f, replica %.2f, bridge %.2f, bench process %.2f, watchers %.2f; replica RSS %.0f MiB; established in %s",
						round, r.sides[w.side].name, watchersOf(n), latencyPercentile(s, 0.5).Round(100*time.Microsecond), latencyPercentile(s, 0.99).Round(100*time.Microsecond),
						w.window.Seconds(), w.api.Seconds(), w.replica.Seconds(), w.bridge.Seconds(), w.bench.Seconds(), w.watchers.Seconds(),
						mib(w.replicaRSS), w.established.Round(time.Millisecond))
				}
			}
		}
	}
	return runs
}

// cpuReading is the CPU time each process had used by one moment.
type cpuReading struct {
	api, replica, bridge, bench, watchers time.Duration
}

func (r *replicaRun) readCPU(watchers *child) cpuReading {
	b := r.b
	c := cpuReading{
		api:      procCPUTime(b, r.cp.APIServerPID()),
		replica:  procCPUTime(b, r.replica.cmd.Process.Pid),
		bench:    processCPU(),
		watchers: procCPUTime(b, watchers.cmd.Process.Pid),
	}
	if r.bridge != nil {
		c.bridge = procCPUTime(b, r.bridge.cmd.Process.Pid)
	}
	return c
}

// watchRun runs n watchers on side (0 the kube-apiserver, 1 the replica)
// and measures replicaChanges changes' delays and the processes' CPU.
func (r *replicaRun) watchRun(side, n int) watchRun {
	b := r.b
	w := watchRun{side: side, n: n}
	if side == 1 {
		r.startBridge()
		r.waitReplicaCurrent()
	}
	s := r.sides[side]
	c := startChild(b, fmt.Sprintf("%s (%s)", watchersOf(n), s.name), r.watchersBin, nil,
		"-kubeconfig", s.kubeconfig, "-namespace", replicaNamespace, "-n", strconv.Itoa(n), "-marker", replicaChangeMarker)
	w.established = c.waitLog(b, "watching", 10*time.Minute).At.Sub(c.started)
	time.Sleep(replicaWatchSettle)

	before := r.readCPU(c)
	t0 := time.Now()
	sent := map[int]time.Time{}
	for k := range replicaChanges {
		time.Sleep(time.Until(t0.Add(time.Duration(k) * replicaChangeEvery)))
		id := r.changes
		r.changes++
		sent[id] = time.Now()
		r.change(id)
	}
	end := t0.Add(replicaChanges*replicaChangeEvery + replicaWatchTail)
	arrived := r.waitDelivered(c, sent)
	if last := slices.MaxFunc(arrived, func(a, b delivered) int { return a.at.Compare(b.at) }); last.at.After(end) {
		end, w.extended = last.at, true
	}
	time.Sleep(time.Until(end))
	after := r.readCPU(c)
	w.window = time.Since(t0)
	w.api, w.replica, w.bridge = after.api-before.api, after.replica-before.replica, after.bridge-before.bridge
	w.bench, w.watchers = after.bench-before.bench, after.watchers-before.watchers
	for _, a := range arrived {
		w.delays = append(w.delays, a.at.Sub(sent[a.change]))
	}
	st := procStatus(r.replica.cmd.Process.Pid)
	w.replicaRSS, w.replicaHWM = st["VmRSS"], st["VmHWM"]
	w.apiRSS = procStatus(r.cp.APIServerPID())["VmRSS"]
	w.watchersHWM = procStatus(c.cmd.Process.Pid)["VmHWM"]
	c.stop(b)
	if side == 1 {
		r.stopBridge()
	}
	return w
}

// change writes change id: the marker annotation on one of the
// ConfigMaps, in turn.
func (r *replicaRun) change(id int) {
	b := r.b
	ref := r.refs[id%len(r.refs)]
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, replicaChangeMarker, strconv.Itoa(id))
	_, err := r.kc.CoreV1().ConfigMaps(ref.Namespace).Patch(b.Context(), ref.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		b.Fatalf("change %d: %v", id, err)
	}
	r.last = ref
}

// delivered is when a change reached the last of the watchers.
type delivered struct {
	change int
	at     time.Time
}

// waitDelivered waits until the watchers report every change in sent
// delivered to all of them, and returns when each was.
func (r *replicaRun) waitDelivered(c *child, sent map[int]time.Time) []delivered {
	b := r.b
	var out []delivered
	c.waitFor(b, fmt.Sprintf("%d changes delivered", len(sent)), 2*time.Minute, func() (logLine, bool) {
		out = out[:0]
		for _, line := range c.lines {
			if line.Msg != "delivered" {
				continue
			}
			var d struct {
				Change int   `json:"change"`
				LastNs int64 `json:"lastNs"`
			}
			if err := json.Unmarshal(line.Raw, &d); err != nil {
				continue
			}
			if _, ok := sent[d.Change]; ok {
				out = append(out, delivered{change: d.Change, at: time.Unix(0, d.LastNs)})
			}
		}
		return logLine{}, len(out) == len(sent)
	})
	return out
}

// waitReplicaCurrent waits until the replica shows the latest change,
// written while the bridge was stopped: the watchers of the next run must
// not receive it.
func (r *replicaRun) waitReplicaCurrent() {
	b := r.b
	if r.changes == 0 {
		return
	}
	kc, err := kubernetes.NewForConfig(r.sides[1].rc)
	if err != nil {
		b.Fatal(err)
	}
	want := strconv.Itoa(r.changes - 1)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cm, err := kc.CoreV1().ConfigMaps(r.last.Namespace).Get(b.Context(), r.last.Name, metav1.GetOptions{})
		if err == nil && cm.Annotations[replicaChangeMarker] == want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("replica does not show change %s of %s/%s after 2m (%v)", want, r.last.Namespace, r.last.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchersOf is "1 watcher", "100 watchers".
func watchersOf(n int) string {
	if n == 1 {
		return "1 watcher"
	}
	return fmt.Sprintf("%s watchers", thousands(n))
}
