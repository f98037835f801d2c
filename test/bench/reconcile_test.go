package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
)

// The reconcile scenario's shape.
const (
	// reconcileObjects ConfigMaps of about 2 KiB, in reconcileNamespaces.
	reconcileObjects    = 50_000
	reconcileNamespaces = 5
	// reconcileRounds of a pass, a LIST and a restart, per bus.
	reconcileRounds = 3
	// reconcileInterval is BRIDGE_RECONCILE_INTERVAL in the scenario: a
	// LIST, and a quiet window on each side of it, fit between two
	// passes.
	reconcileInterval = 45 * time.Second
	// reconcileQuiet is the quiet window before each pass, LIST and
	// restart, over which the API server's idle CPU is measured.
	reconcileQuiet = 5 * time.Second
	// reconcileObjectsEnv, when set, is the number of ConfigMaps instead
	// of reconcileObjects, to try the scenario quickly.
	reconcileObjectsEnv = "BENCH_RECONCILE_OBJECTS"
	// bridgeClientName is the name the bridge gives its NATS connection
	// (sink/nats), by which the server's bytes to it are counted.
	bridgeClientName = "kubebus-bridge"
)

// BenchmarkReconcile measures what one reconcile pass costs when the bus
// agrees with the cluster, on 50,000 ConfigMaps of about 2 KiB, for each
// bus in its state layout: NATS JetStream (an in-process nats-server,
// file store) and Kafka (an in-process kfake cluster of three brokers).
// The bridge runs as a process (file checkpoint) with
// BRIDGE_RECONCILE_INTERVAL=45s, so that a pass runs 45 s after it is
// ready and every 45 s after.
//
// A pass is timed by the line the bridge logs at its end ("reconcile: the
// bus agrees with the cluster", with took=): its window is the took
// before that line's time. Over the window, from readings every 20 ms:
// the API server's CPU time (utime+stime of /proc/<pid>/stat) less its
// idle CPU over an equal window (what it used over the 5 s before, scaled
// to the window's length), the bridge's CPU time, and the bytes the bus
// sent: for NATS, the server's out_bytes to the bridge's connection
// (connz); for Kafka, the bytes kfake's brokers wrote to their
// connections (a counting listener; only the bridge is connected). The API
// server's requests for ConfigMaps other than WATCH are read from its
// apiserver_request_total before and after.
//
// The baseline is what a pass is held to: one LIST of the same ConfigMaps
// (GET /api/v1/configmaps as JSON, unpaginated, the client offering gzip
// as client-go does), measured the same way, its bytes counted on the
// wire; and the bridge's restart on its checkpoint, from its start until
// it logs the initial state published, which now includes reading the
// bus. Each of three rounds per bus measures a pass, a LIST (alternating
// which goes first) and a restart; figures are medians, with every
// round's value in the note.
func BenchmarkReconcile(b *testing.B) {
	setup := startProcessSetup(b)
	ctx, cp, kc, dir := b.Context(), setup.cp, setup.kc, setup.dir
	n := reconcileObjects
	if s := os.Getenv(reconcileObjectsEnv); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("%s=%q: want a number of at least 100", reconcileObjectsEnv, s)
		}
	}
	namespaces := namespaceNames("reconcile", reconcileNamespaces)
	f := fillConfigMaps(b, ctx, kc, namespaces, n)
	size, others := f.size, f.others
	bridgeBin, _ := setup.binaries(b)
	lister := newLister(b, cp.RESTConfig())

	common := []string{
		"KUBECONFIG=" + cp.KubeconfigPath(),
		"BRIDGE_RESOURCES=configmaps",
		"BRIDGE_CLUSTER_NAME=bench",
		"BRIDGE_METRICS_ADDR=127.0.0.1:0",
		"BRIDGE_LOG_FORMAT=json",
		"BRIDGE_RECONCILE_INTERVAL=" + reconcileInterval.String(),
	}
	shape := reconcileShape{objects: n + others, written: n, size: size}
	var results []reconcileResult

	nats := natstest.Start(b, natstest.Options{})
	results = append(results, runReconcile(b, reconcileRig{
		bus: "NATS JetStream", kc: kc, bin: bridgeBin, lister: lister, shape: shape,
		env: slices.Concat(common, []string{
			"BRIDGE_SINK=nats",
			"BRIDGE_NATS_LAYOUT=state",
			"BRIDGE_CHECKPOINT=file:" + filepath.Join(dir, "nats-checkpoint.db"),
		}, envList(nats.Env())),
		busSent: func() int64 { return nats.SentTo(bridgeClientName) },
	}, cp.APIServerPID()))

	var sent byteCount
	kafka := kafkatest.Start(b, kafkatest.WithListenFn(sent.listen))
	results = append(results, runReconcile(b, reconcileRig{
		bus: "Kafka", kc: kc, bin: bridgeBin, lister: lister, shape: shape,
		env: slices.Concat(common, []string{
			"BRIDGE_SINK=kafka",
			"BRIDGE_KAFKA_BROKERS=" + strings.Join(kafka.Addrs(), ","),
			"BRIDGE_KAFKA_LAYOUT=state",
			"BRIDGE_CHECKPOINT=file:" + filepath.Join(dir, "kafka-checkpoint.db"),
		}),
		busSent: sent.Load,
	}, cp.APIServerPID()))

	for _, r := range results {
		r.record(b)
	}
	b.Logf("reconcile scenario took %s", time.Since(setup.began).Round(time.Second))
}

// reconcileShape is what the scenario's bridge watches.
type reconcileShape struct {
	objects int     // ConfigMaps in the cluster, all watched
	written int     // of which the scenario wrote
	size    float64 // mean size of those as JSON, managedFields included
}

// runReconcile starts the bridge on rig's bus, lets it publish every
// object, and runs the rounds.
func runReconcile(b *testing.B, rig reconcileRig, apiPID int) reconcileResult {
	b.Helper()
	rig.b = b
	rig.use = startUsage(b, apiPID, rig.busSent)
	ready := rig.start()
	waitSettled(b, rig.br, 5*time.Minute)
	s := rig.bridgeMetrics()
	if got := s.Sum("bridge_deltas_published_total"); int(got) != rig.shape.objects {
		b.Fatalf("%s: the bridge published %.0f events at its first start, want one for each of the %d ConfigMaps", rig.bus, got, rig.shape.objects)
	}
	res := reconcileResult{bus: rig.bus, shape: rig.shape, firstSync: ready.At.Sub(rig.br.started)}
	rig.scrape()
	for round := range reconcileRounds {
		var p passResult
		var l listResult
		// Alternate which goes first, so that neither always follows the
		// restart.
		if round%2 == 0 {
			p = rig.pass()
			l = rig.list()
		} else {
			l = rig.list()
			p = rig.pass()
		}
		r := rig.restart()
		if testing.Verbose() {
			b.Logf("%s round %d: pass %s (API server %s net, bridge %s CPU, %d bus bytes, %.0f requests); LIST %s (API server %s net, %d bytes on the wire, %d as JSON, %.0f requests); restart %s (API server %s net, bridge %s CPU, %d bus bytes)",
				rig.bus, round+1, p.took, p.api.net, p.bridgeCPU, p.busBytes, p.requests,
				l.took.Round(time.Millisecond), l.api.net, l.wire, l.body, l.requests,
				r.took.Round(time.Millisecond), r.api.net, r.bridgeCPU, r.busBytes)
		}
		res.passes = append(res.passes, p)
		res.lists = append(res.lists, l)
		res.restarts = append(res.restarts, r)
	}
	rig.br.stop(b)
	rig.use.stop()
	return res
}
