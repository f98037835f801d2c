package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/metricstest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// quietPeriod is how long no message may arrive after the restarted bridge
// reports itself caught up before its messages are counted: three of its
// checkpoint intervals.
const quietPeriod = 3 * time.Second

// restartRound is what one round of the restart scenario measured.
type restartRound struct {
	objects int
	// bridge is the time from the bridge's start until it logged that the
	// initial state was published; lastMessage until the last of its
	// messages reached the bus's subscriber.
	bridge, lastMessage time.Duration
	// bare is the time from the bare informer's start until its cache
	// synced.
	bare time.Duration
	// emitted counts the messages seen on the bus's subjects from the
	// bridge's start to its stop, byAction splits them by event type;
	// stored is how many the stream gained and published what the bridge
	// counted in bridge_deltas_published_total.
	emitted   int
	byAction  map[string]int
	stored    int
	published float64
	// heap is the bridge's heap in use once caught up, when measured.
	heap float64
}

// restarts runs the restart scenario: restartRounds rounds of changing
// objects while the bridge is stopped, then timing the bare informer's
// sync and the bridge's restart on the same objects.
func (e *experiment) restarts(kc kubernetes.Interface, refs []objectRef) {
	b := e.b
	var rounds []restartRound
	for r := range restartRounds {
		lo := r * 2 * restartChanges
		update, del := refs[lo:lo+restartChanges], refs[lo+restartChanges:lo+2*restartChanges]
		if err := changeConfigMaps(b.Context(), kc, update, del, uint64(r+1), writers); err != nil {
			b.Fatal(err)
		}
		e.objects -= len(del)
		rd := restartRound{objects: e.objects}
		bare := func() { rd.bare = e.bareSync() }
		bridge := func() { e.bridgeRestart(&rd, r == restartRounds-1) }
		// Alternate which goes first, so that neither always meets the
		// API server's caches in the same state.
		if r%2 == 0 {
			bare()
			bridge()
		} else {
			bridge()
			bare()
		}
		if testing.Verbose() {
			b.Logf("restart round %d: %d objects, bridge caught up in %s (last message at %s), bare informer synced in %s; %d messages %v",
				r+1, rd.objects, rd.bridge.Round(time.Millisecond), rd.lastMessage.Round(time.Millisecond), rd.bare.Round(time.Millisecond), rd.emitted, rd.byAction)
		}
		rounds = append(rounds, rd)
	}

	const scenario = "Restart cost"
	want := 2 * restartChanges
	worst, exact := rounds[0], true
	var perRound []string
	for _, rd := range rounds {
		if abs(rd.emitted-want) > abs(worst.emitted-want) {
			worst = rd
		}
		if rd.emitted != want || rd.byAction["updated"] != restartChanges || rd.byAction["deleted"] != restartChanges {
			exact = false
		}
		perRound = append(perRound, fmt.Sprintf("%d (%s; stream +%d; bridge_deltas_published_total %.0f)",
			rd.emitted, actions(rd.byAction), rd.stored, rd.published))
	}
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("messages emitted after %d updates and %d deletes while stopped", restartChanges, restartChanges),
		Unit: "messages", Bridge: float64(worst.emitted), Baseline: float64(want), BaselineName: "changes made while stopped",
		Target: fmt.Sprintf("exactly %s", thousands(want)), Met: exact,
		Note: fmt.Sprintf("every message on the bus's subjects from the restart until the bridge stopped, at least %s after it was caught up; the round furthest from the target is shown. Per round: %s.",
			quietPeriod, strings.Join(perRound, ", ")),
	})

	// The two of a round ran back to back on the same objects, under the
	// same load from the rest of the machine; the round whose ratio is the
	// median stands for all of them.
	var pairs []string
	var heap float64
	for _, rd := range rounds {
		pairs = append(pairs, fmt.Sprintf("%.2f s vs %.2f s", rd.bridge.Seconds(), rd.bare.Seconds()))
		if rd.heap > 0 {
			heap = rd.heap
		}
	}
	byRatio := slices.SortedFunc(slices.Values(rounds), func(x, y restartRound) int {
		return cmp.Compare(x.bridge.Seconds()/x.bare.Seconds(), y.bridge.Seconds()/y.bare.Seconds())
	})
	mid := byRatio[len(byRatio)/2]
	record(b, Figure{
		Scenario: scenario, Name: "time from start until caught up",
		Unit: "s", Bridge: mid.bridge.Seconds(), Baseline: mid.bare.Seconds(), BaselineName: "bare client-go dynamic informer's initial sync",
		Target: "≤ 0.8× baseline", Met: mid.bridge.Seconds() <= 0.8*mid.bare.Seconds(),
		Note: fmt.Sprintf("%s to %s ConfigMaps. Each of %d rounds timed the bridge and the bare informer back to back on the same objects (alternating which went first), from starting the process until the benchmark read its log line saying it was caught up (bridge: initial state published, i.e. the relist compared with the checkpoint and every change acknowledged by JetStream; bare informer: cache synced); shown is the round with the median ratio. Bridge vs bare informer per round: %s. The bridge's heap in use after the last restart: %.0f MiB.",
			thousands(rounds[len(rounds)-1].objects), thousands(rounds[0].objects), len(rounds), strings.Join(pairs, ", "), mib(heap)),
	})
}

// bareSync starts the bare informer, waits until its cache is synced, stops
// it, and returns the time from its start until it was synced.
func (e *experiment) bareSync() time.Duration {
	b := e.b
	bare := startChild(b, "bare informer", e.bareBin, e.bareEnv)
	synced := bare.waitLog(b, "synced", 10*time.Minute)
	checkCached(b, synced, e.objects)
	bare.stop(b)
	return synced.At.Sub(bare.started)
}

// bridgeRestart starts the bridge on its checkpoint, waits until it has
// caught up and published nothing more for quietPeriod, and stops it,
// counting every message that reached the bus meanwhile. With heap, it
// also reads the bridge's heap in use once caught up.
func (e *experiment) bridgeRestart(rd *restartRound, heap bool) {
	b := e.b
	l := e.bus.listen(b)
	before := e.bus.storedNow(b)
	br := startChild(b, "bridge", e.bridgeBin, e.bridgeEnv)
	ready := br.waitLog(b, "ready", 10*time.Minute)
	waitSettled(b, br, 5*time.Minute)
	l.waitQuiet(quietPeriod)
	s, err := metricstest.Scrape(br.metricsAddr(b))
	if err != nil {
		b.Fatal(err)
	}
	if heap {
		rd.heap = measureMemory(b, br, memoryReadings).HeapInuse
	}
	br.stop(b)
	var last time.Time
	rd.emitted, rd.byAction, last = l.close(b)
	rd.bridge = ready.At.Sub(br.started)
	if !last.IsZero() {
		rd.lastMessage = last.Sub(br.started)
	}
	rd.published = s.Sum("bridge_deltas_published_total")
	rd.stored = e.bus.storedNow(b) - before
}

// busWatch watches the bus the bridge publishes to: the stream's size, and
// every message on its subjects while a listener is open.
type busWatch struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// The bridge's defaults: the stream it creates and the subjects it
// captures.
const (
	busStream   = "KUBE"
	busSubjects = "kube.>"
)

func newBusWatch(b *testing.B, srv *natstest.Server) *busWatch {
	b.Helper()
	nc := srv.Conn(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return &busWatch{nc: nc, js: js}
}

// stored returns how many messages the stream holds; 0 before the bridge
// created it.
func (w *busWatch) stored(b *testing.B) (int, error) {
	st, err := w.js.Stream(b.Context(), busStream)
	if err != nil {
		return 0, err
	}
	// The cluster's discovery document is not an object's.
	info, err := st.Info(b.Context(), jetstream.WithSubjectFilter(wire.DiscoverySubjects("kube")))
	if err != nil {
		return 0, err
	}
	n := int(info.State.Msgs)
	for _, c := range info.State.Subjects {
		n -= int(c)
	}
	return n, nil
}

// storedNow is stored, failing the benchmark on error.
func (w *busWatch) storedNow(b *testing.B) int {
	b.Helper()
	n, err := w.stored(b)
	if err != nil {
		b.Fatalf("stream %s: %v", busStream, err)
	}
	return n
}

// waitStored waits until the stream holds n messages.
func (w *busWatch) waitStored(b *testing.B, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := w.stored(b)
		if err == nil && got == n {
			return
		}
		if err == nil && got > n {
			b.Fatalf("stream %s holds %d messages, more than the %d objects", busStream, got, n)
		}
		if time.Now().After(deadline) {
			b.Fatalf("stream %s holds %d of %d messages after %s (%v)", busStream, got, n, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// busListener counts the messages published on the bridge's subjects,
// duplicates included, by event type.
type busListener struct {
	sub *nats.Subscription

	mu       sync.Mutex
	n        int
	byAction map[string]int
	last     time.Time
}

// listen subscribes to the bridge's subjects until close.
func (w *busWatch) listen(b *testing.B) *busListener {
	b.Helper()
	l := &busListener{byAction: map[string]int{}}
	sub, err := w.nc.Subscribe(busSubjects, func(m *nats.Msg) {
		if wire.SubjectMatches(wire.DiscoverySubjects("kube"), m.Subject) {
			return // the cluster's discovery document, not an object's
		}
		var ev struct{ Type string }
		_ = json.Unmarshal(m.Data, &ev)
		action := ev.Type[strings.LastIndexByte(ev.Type, '.')+1:]
		l.mu.Lock()
		defer l.mu.Unlock()
		l.n++
		l.byAction[action]++
		l.last = time.Now()
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		b.Fatal(err)
	}
	if err := w.nc.Flush(); err != nil {
		b.Fatal(err)
	}
	l.sub = sub
	return l
}

func (l *busListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// waitQuiet waits until no message has arrived for quiet.
func (l *busListener) waitQuiet(quiet time.Duration) {
	n, since := l.count(), time.Now()
	for time.Since(since) < quiet {
		time.Sleep(100 * time.Millisecond)
		if m := l.count(); m != n {
			n, since = m, time.Now()
		}
	}
}

// close takes in what the server sent so far, unsubscribes, and returns
// the count, the count by event type, and when the last message arrived.
func (l *busListener) close(b *testing.B) (int, map[string]int, time.Time) {
	b.Helper()
	if err := l.sub.Drain(); err != nil {
		b.Fatal(err)
	}
	for l.sub.IsValid() {
		time.Sleep(10 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.byAction, l.last
}

func abs(n int) int { return max(n, -n) }

// actions lists counts by event type, in a stable order.
func actions(by map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, fmt.Sprintf("%d %s", by[k], k))
	}
	return strings.Join(out, ", ")
}

// thousands writes n with thousands separators: 50,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
