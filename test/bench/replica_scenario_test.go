package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/natstest"
)

// The replica scenario's shape.
const (
	// replicaObjects ConfigMaps of about 2 KiB, all in replicaNamespace.
	replicaObjects   = 10_000
	replicaNamespace = "replica-bench"
	// replicaCluster is the bridge's BRIDGE_CLUSTER_NAME: the replica
	// serves it under /clusters/bench.
	replicaCluster = "bench"
	// replicaObjectsEnv and replicaWatchersEnv, when set, shrink the
	// scenario for a trial on a busy machine: a number of ConfigMaps
	// instead of replicaObjects, and comma-separated numbers of watchers
	// instead of replicaWatcherCounts. `make bench` sets neither.
	replicaObjectsEnv  = "BENCH_REPLICA_OBJECTS"
	replicaWatchersEnv = "BENCH_REPLICA_WATCHERS"
)

// replicaWatcherCounts are the numbers of watchers of the fan-out runs.
var replicaWatcherCounts = []int{1, 100, 1000}

// BenchmarkReplica measures the replica (cmd/replica), the read-only
// Kubernetes API served from the bus, side by side with the real
// kube-apiserver serving the same objects: 10,000 ConfigMaps of about
// 2 KiB in one namespace, written through the API server (managedFields
// included). The bridge publishes them to NATS JetStream (state layout);
// the replica reads them from there.
//
// Both sides are asked by the same client: client-go's REST client, JSON,
// HTTP/2 over TLS with the same certificate and key (the replica serves
// the API server's own), the same bearer token (the control plane's
// admin token, which the replica's token file names), gzip offered as Go
// offers it. Only the URL differs: the replica's is /clusters/bench.
//
// Three measurements, in this order:
//
//   - Memory per object held: the replica's VmHWM and its VmRSS three
//     seconds after its ConfigMap cache synced (its first request, a LIST
//     with limit=1, waits for that), divided by the ConfigMaps it holds.
//     The baseline is a bare client-go dynamic informer (cmd/bareinformer)
//     holding the same objects, read the same way: the least memory a
//     client that answers reads of these objects from memory needs. The
//     kube-apiserver's own share cannot be told apart from the rest of it
//     (its watch cache holds every resource, and its memory moves with
//     every write), so it is no baseline here.
//   - List latency: a whole LIST of the namespace's ConfigMaps, and a
//     paged one (limit=500, following continue to the end), timed until
//     the last byte of the last answer is read, on each side in turn,
//     over replicaListRounds rounds that alternate which side goes first.
//   - Watch fan-out: N watchers (1, 100, 1,000) of the namespace's
//     ConfigMaps in a child process (cmd/watchers), each with its own
//     connection; once all are watching, replicaChanges changes paced
//     replicaChangeEvery apart, and each change's delay from the moment
//     its write was sent until the last of the N watchers received it.
//     The kube-apiserver's CPU time is read over a window of the same
//     length on both sides and for every N; the replica's, the bridge's
//     and the benchmark process's (which holds the NATS server) too.
//     Through the replica, the bridge runs only during the replica's runs,
//     so that the direct runs' API server serves no watch of ours.
func BenchmarkReplica(b *testing.B) {
	setup := startProcessSetup(b,
		"github.com/kubebus/bridge/cmd/replica",
		"github.com/kubebus/bridge/test/bench/cmd/bareinformer",
		"github.com/kubebus/bridge/test/bench/cmd/watchers")
	ctx, cp, kc, dir := b.Context(), setup.cp, setup.kc, setup.dir
	n, counts := replicaShape(b)
	f := fillConfigMaps(b, ctx, kc, []string{replicaNamespace}, n)
	bridgeBin, programs := setup.binaries(b)
	replicaBin, bareBin, watchersBin := programs[0], programs[1], programs[2]

	bus := natstest.Start(b, natstest.Options{})
	r := &replicaRun{
		b: b, cp: cp, kc: kc, refs: f.refs, held: n + f.others, size: f.size,
		bridgeBin: bridgeBin, watchersBin: watchersBin, busWatch: newBusWatch(b, bus),
		bridgeEnv: append([]string{
			"KUBECONFIG=" + cp.KubeconfigPath(),
			"BRIDGE_RESOURCES=configmaps",
			"BRIDGE_SINK=nats",
			"BRIDGE_NATS_LAYOUT=state",
			"BRIDGE_CHECKPOINT=file:" + filepath.Join(dir, "checkpoint.db"),
			"BRIDGE_CLUSTER_NAME=" + replicaCluster,
			"BRIDGE_METRICS_ADDR=127.0.0.1:0",
			"BRIDGE_LOG_FORMAT=json",
		}, envList(bus.Env())...),
	}
	r.startBridge()
	var replica replicaSide
	r.replica, replica = startReplica(b, replicaBin, cp, bus.URL(), replicaCluster, dir)
	r.sides = [2]replicaSide{apiServerSide(cp), replica}
	r.version = serverVersion(b, kc)

	mem := r.memory(bareBin)
	lists := r.lists()
	watches := r.fanOut(counts)
	r.recordMemory(mem)
	r.recordLists(lists)
	r.recordFanOut(watches, counts)
	b.Logf("replica scenario took %s", time.Since(setup.began).Round(time.Second))
}

// replicaShape is the number of ConfigMaps and the numbers of watchers,
// from the environment when it shrinks them.
func replicaShape(b *testing.B) (int, []int) {
	b.Helper()
	n, counts := replicaObjects, replicaWatcherCounts
	if s := os.Getenv(replicaObjectsEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < replicaPageSize {
			b.Fatalf("%s=%q: want a number of at least %d", replicaObjectsEnv, s, replicaPageSize)
		}
		n = v
	}
	if s := os.Getenv(replicaWatchersEnv); s != "" {
		counts = nil
		for f := range strings.SplitSeq(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 1 {
				b.Fatalf("%s=%q: want comma-separated numbers of at least 1", replicaWatchersEnv, s)
			}
			counts = append(counts, v)
		}
		slices.Sort(counts)
	}
	return n, counts
}

// replicaRun is the state the replica scenario's parts share.
type replicaRun struct {
	b       *testing.B
	cp      *controlplane.ControlPlane
	kc      kubernetes.Interface
	refs    []objectRef // the ConfigMaps written, all in replicaNamespace
	held    int         // ConfigMaps in the cluster: what a cache of them holds
	size    float64     // mean size of one, as JSON
	version string      // the kube-apiserver's

	bridgeBin, watchersBin string
	bridgeEnv              []string
	bridge                 *child // running, or nil
	bridgeStarted          bool   // once
	replica                *child
	busWatch               *busWatch
	sides                  [2]replicaSide // the kube-apiserver's, the replica's

	// negotiated says how the list clients spoke to each side.
	negotiated string
	// wholeParts is, per side, the most answers a LIST without limit
	// came in: 1 on the API server.
	wholeParts [2]int

	// changes numbers the fan-out's changes across runs, and last is the
	// latest one written and the object it went to.
	changes int
	last    objectRef
}

// startBridge starts the bridge. Its first start waits until it has
// published every ConfigMap and checkpointed them; a restart, until it is
// ready (it publishes what changed while it was stopped, and the replica
// shows it: see waitReplicaCurrent).
func (r *replicaRun) startBridge() {
	b := r.b
	first := !r.bridgeStarted
	r.bridgeStarted = true
	r.bridge = startChild(b, "bridge", r.bridgeBin, r.bridgeEnv)
	r.bridge.waitLog(b, "ready", 10*time.Minute)
	if first {
		r.busWatch.waitStored(b, r.held, 5*time.Minute)
		waitSettled(b, r.bridge, 5*time.Minute)
	}
}

// stopBridge stops the bridge.
func (r *replicaRun) stopBridge() {
	r.bridge.stop(r.b)
	r.bridge = nil
}

// replicaMemory is what the memory part read.
type replicaMemory struct {
	replica, bare asSeen
	// replicaSync is the time from the replica's first request until its
	// answer: how long its cache took to read the state from the bus.
	replicaSync, bareSync time.Duration
	// before is the replica's VmRSS before its first request, with its
	// cache empty.
	before float64
}

// memory reads the replica's memory once its ConfigMap cache holds the
// bus's state, then the bare informer's once it synced, one after the
// other.
func (r *replicaRun) memory(bareBin string) replicaMemory {
	b := r.b
	var m replicaMemory
	m.before = procStatus(r.replica.cmd.Process.Pid)["VmRSS"]
	t0 := time.Now()
	r.listOne(r.sides[1])
	m.replicaSync = time.Since(t0)
	m.replica = seenAfter(b, r.replica, memorySeenAfter)

	bare := startChild(b, "bare informer", bareBin, []string{"KUBECONFIG=" + r.cp.KubeconfigPath()})
	synced := bare.waitLog(b, "synced", 10*time.Minute)
	checkCached(b, synced, r.held)
	m.bareSync = synced.At.Sub(bare.started)
	m.bare = seenAfter(b, bare, memorySeenAfter)
	bare.stop(b)
	if testing.Verbose() {
		b.Logf("memory: replica VmHWM %.0f MiB, VmRSS %.0f MiB (synced in %s); bare informer VmHWM %.0f MiB, VmRSS %.0f MiB (synced in %s)",
			mib(m.replica.Peak), mib(m.replica.RSS), m.replicaSync.Round(time.Millisecond),
			mib(m.bare.Peak), mib(m.bare.RSS), m.bareSync.Round(time.Millisecond))
	}
	return m
}

// listOne lists one ConfigMap of the namespace on side, which on the
// replica waits for its cache to sync.
func (r *replicaRun) listOne(side replicaSide) {
	b := r.b
	kc, err := kubernetes.NewForConfig(side.rc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	for {
		_, err := kc.CoreV1().ConfigMaps(replicaNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return
		}
		// 504 while the cache fills past the replica's sync timeout.
		if ctx.Err() != nil {
			b.Fatalf("%s: list configmaps: %v", side.name, err)
		}
		time.Sleep(time.Second)
	}
}

// serverVersion is the kube-apiserver's version, for the notes.
func serverVersion(b *testing.B, kc kubernetes.Interface) string {
	b.Helper()
	v, err := kc.Discovery().ServerVersion()
	if err != nil {
		b.Fatal(err)
	}
	return v.GitVersion
}

// objectsShape says what the sides serve, for the notes.
func (r *replicaRun) objectsShape() string {
	return fmt.Sprintf("%s ConfigMaps of %.0f B on average as JSON (managedFields included) in one namespace; kube-apiserver %s, etcd on the same machine; the replica reads them from NATS JetStream (state layout), where the bridge published them",
		thousands(len(r.refs)), r.size, r.version)
}
