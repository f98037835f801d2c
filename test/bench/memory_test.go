package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/metricstest"
	"github.com/kubebus/bridge/test/natstest"
)

// The memory and restart scenarios share one set of objects, since writing
// them is the expensive step.
const (
	// watchedObjects ConfigMaps of about 2 KiB, in memoryNamespaces.
	watchedObjects   = 50_000
	memoryNamespaces = 5
	// writers is how many requests are in flight while objects are
	// written.
	writers = 32
	// memoryReadings per process; the minimum is reported.
	memoryReadings = 5
	// memorySeenAfter is how long after its work a process's memory is
	// read as a user sees it: a few seconds, without a forced GC.
	memorySeenAfter = 3 * time.Second
	// restartChanges objects are updated, and as many deleted, while the
	// bridge is stopped, in each of restartRounds rounds.
	restartChanges = 500
	restartRounds  = 5
)

// BenchmarkMemoryAndRestart runs two scenarios on 50,000 ConfigMaps of
// about 2 KiB each, written through the API server so that they carry
// managedFields as it writes them.
//
// Memory per watched object: the bridge (NATS JetStream sink, file
// checkpoint) starts, publishes every object, and flushes its checkpoint;
// then its heap in use and RSS are read. The baseline is a bare client-go
// dynamic informer caching the same objects (cmd/bareinformer), read the
// same way. The two run one after the other, never at the same time.
//
// Restart cost: with everything checkpointed and the bridge stopped, 500
// objects are updated and 500 deleted; the bridge restarts and publishes
// what changed. Counted: every message on the bus's subjects from its
// start to its stop, and the time from its start until it reports the
// initial state published. The baseline is the bare informer's start until
// its cache is synced, on the same objects. Five rounds, alternating which
// of the two goes first; the round with the median ratio is reported.
func BenchmarkMemoryAndRestart(b *testing.B) {
	setup := startProcessSetup(b, "github.com/kubebus/bridge/test/bench/cmd/bareinformer")
	ctx, cp, kc, dir := b.Context(), setup.cp, setup.kc, setup.dir
	bus := natstest.Start(b, natstest.Options{})
	namespaces := namespaceNames("bench", memoryNamespaces)
	f := fillConfigMaps(b, ctx, kc, namespaces, watchedObjects)
	refs, size, others := f.refs, f.size, f.others
	bridgeBin, programs := setup.binaries(b)

	e := &experiment{
		b:       b,
		bus:     newBusWatch(b, bus),
		objects: watchedObjects + others,
		bareEnv: []string{"KUBECONFIG=" + cp.KubeconfigPath()},
		bridgeEnv: append([]string{
			"KUBECONFIG=" + cp.KubeconfigPath(),
			"BRIDGE_RESOURCES=configmaps",
			"BRIDGE_SINK=nats",
			"BRIDGE_CHECKPOINT=file:" + filepath.Join(dir, "checkpoint.db"),
			"BRIDGE_CLUSTER_NAME=bench",
			"BRIDGE_METRICS_ADDR=127.0.0.1:0",
			"BRIDGE_PPROF=true",
			"BRIDGE_LOG_FORMAT=json",
		}, envList(bus.Env())...),
		bridgeBin: bridgeBin,
		bareBin:   programs[0],
	}
	e.memory(size)
	e.restarts(kc, refs)
	b.Logf("memory and restart scenarios took %s", time.Since(setup.began).Round(time.Second))
}

// experiment is the state the two scenarios share.
type experiment struct {
	b                  *testing.B
	bus                *busWatch
	objects            int // ConfigMaps in the cluster, all watched
	bridgeBin, bareBin string
	bridgeEnv, bareEnv []string
}

// memory runs the memory scenario: the bridge's first start, which
// publishes every object, then the bare informer.
func (e *experiment) memory(objectSize float64) {
	b := e.b
	br := startChild(b, "bridge", e.bridgeBin, e.bridgeEnv)
	ready := br.waitLog(b, "ready", 15*time.Minute)
	e.bus.waitStored(b, e.objects, 5*time.Minute)
	waitSettled(b, br, 5*time.Minute)
	firstSync := ready.At.Sub(br.started)
	bridgeSeen := seenAfter(b, br, memorySeenAfter)
	bridgeMem := measureMemory(b, br, memoryReadings)
	br.stop(b)

	bare := startChild(b, "bare informer", e.bareBin, e.bareEnv)
	bareSync := bare.waitLog(b, "synced", 10*time.Minute)
	checkCached(b, bareSync, e.objects)
	bareSeen := seenAfter(b, bare, memorySeenAfter)
	bareMem := measureMemory(b, bare, memoryReadings)
	bare.stop(b)

	const scenario = "Memory per watched object"
	baseline := "bare client-go dynamic informer"
	shape := thousands(watchedObjects) + " ConfigMaps of 2 KiB"
	objects := fmt.Sprintf("%s ConfigMaps watched (%s of %.0f B on average as JSON, managedFields included, plus %d the cluster had already)",
		thousands(e.objects), thousands(watchedObjects), objectSize, e.objects-watchedObjects)
	how := fmt.Sprintf("minimum of %d readings a second apart, each right after a forced GC (GET /debug/pprof/heap?gc=1)", memoryReadings)
	seen := fmt.Sprintf("read from /proc/<pid>/status %s after the bridge had published every object and flushed its checkpoint, and after the bare informer's cache synced, with no forced GC and no scrape before; %s",
		memorySeenAfter, objects)
	record(b, Figure{
		Scenario: scenario, Name: "peak RSS (VmHWM) of the initial sync, " + shape, Unit: "MiB",
		Bridge: mib(bridgeSeen.Peak), Baseline: mib(bareSeen.Peak), BaselineName: baseline,
		Target: "≤ 0.25× baseline", Met: bridgeSeen.Peak <= 0.25*bareSeen.Peak,
		Note: "VmHWM, the most memory the process held at once since it started: what a pod's memory limit must hold. " + seen + ".",
	})
	record(b, Figure{
		Scenario: scenario, Name: fmt.Sprintf("RSS %s after the initial sync, no forced GC, ", memorySeenAfter) + shape, Unit: "MiB",
		Bridge: mib(bridgeSeen.RSS), Baseline: mib(bareSeen.RSS), BaselineName: baseline,
		Target: "≤ 0.2× baseline", Met: bridgeSeen.RSS <= 0.2*bareSeen.RSS,
		Note: "VmRSS as a user sees it in `top`. " + seen + ".",
	})
	record(b, Figure{
		Scenario: scenario, Name: "heap in use after sync, " + shape, Unit: "MiB",
		Bridge: mib(bridgeMem.HeapInuse), Baseline: mib(bareMem.HeapInuse), BaselineName: baseline,
		Target: "≤ 0.5× baseline", Met: bridgeMem.HeapInuse <= 0.5*bareMem.HeapInuse,
		Note: fmt.Sprintf("go_memstats_heap_inuse_bytes, %s; %s. The bridge was read after it had published every object to NATS JetStream (file store) and flushed its file checkpoint (its first sync took %s); the bare informer after its cache synced.",
			how, objects, firstSync.Round(100*time.Millisecond)),
	})
	record(b, Figure{
		Scenario: scenario, Name: "RSS after sync, " + shape, Unit: "MiB",
		Bridge: mib(bridgeMem.RSS), Baseline: mib(bareMem.RSS), BaselineName: baseline,
		Target: "≤ 0.15× baseline", Met: bridgeMem.RSS <= 0.15*bareMem.RSS,
		Note: fmt.Sprintf("process_resident_memory_bytes, %s. Anonymous / file-backed: bridge %.0f / %.0f MiB (file-backed includes the mapped bbolt checkpoint), bare informer %.0f / %.0f MiB.",
			how, mib(bridgeMem.RSSAnon), mib(bridgeMem.RSSFile), mib(bareMem.RSSAnon), mib(bareMem.RSSFile)),
	})
	record(b, Figure{
		Scenario: scenario, Name: "heap in use per object", Unit: "B/object",
		Bridge: bridgeMem.HeapInuse / float64(e.objects), Baseline: bareMem.HeapInuse / float64(e.objects), BaselineName: baseline,
		Note: fmt.Sprintf("heap in use after sync ÷ %s watched objects; the process's fixed heap is counted in too.", thousands(e.objects)),
	})
}

// waitSettled waits until the bridge has nothing pending, every informer is
// synced and every acknowledged position is in the checkpoint.
func waitSettled(b *testing.B, br *child, timeout time.Duration) {
	b.Helper()
	addr := br.metricsAddr(b)
	deadline := time.Now().Add(timeout)
	for {
		s, err := metricstest.Scrape(addr)
		if err == nil && s.Sum("bridge_pending_deltas") == 0 && s.Sum("bridge_checkpoint_lag") == 0 &&
			s.Sum("bridge_checkpoint_last_flush_timestamp_seconds") > 0 && s.Sum("bridge_informer_synced") >= 1 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("bridge not settled after %s (metrics error %v): pending %v, checkpoint lag %v, last flush %v, synced %v",
				timeout, err, s.Sum("bridge_pending_deltas"), s.Sum("bridge_checkpoint_lag"),
				s.Sum("bridge_checkpoint_last_flush_timestamp_seconds"), s.Sum("bridge_informer_synced"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkCached fails the benchmark unless the bare informer's "synced" line
// reports objects cached.
func checkCached(b *testing.B, synced logLine, objects int) {
	b.Helper()
	if want := fmt.Sprintf(`"objects":%d,`, objects); !strings.Contains(string(synced.Raw), want) {
		b.Fatalf("bare informer synced with other than %d objects: %s", objects, synced.Raw)
	}
}

// otherConfigMaps counts the ConfigMaps outside namespaces, which the
// bridge and the bare informer watch too.
func otherConfigMaps(ctx context.Context, kc kubernetes.Interface, namespaces []string) (int, error) {
	var sel []string
	for _, ns := range namespaces {
		sel = append(sel, "metadata.namespace!="+ns)
	}
	list, err := kc.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: strings.Join(sel, ",")})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// envList turns an environment map into KEY=value entries, sorted.
func envList(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
