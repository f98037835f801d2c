package bench

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/controlplane"
	"github.com/kubebus/bridge/test/kafkatest"
)

const (
	// latencyKafkaBaselineName says what the Kafka row's baseline is.
	latencyKafkaBaselineName = "client-go informer on the API server"
	// latencyKafkaUpdates are measured in each of latencyKafkaRounds
	// rounds, one every latencyKafkaSpacing, after latencyKafkaWarmUp more
	// that are not. The rounds follow one another in one run; each
	// round's figure is one of the spread.
	latencyKafkaUpdates = 300
	latencyKafkaRounds  = 3
	latencyKafkaWarmUp  = 50
	latencyKafkaSpacing = 20 * time.Millisecond
	// latencyKafkaObjects is how many ConfigMaps the updates go round.
	latencyKafkaObjects = 20
	// The targets: how much the informer on the bus may lag the one on the
	// API server, at p50 and at p99.
	latencyKafkaP50Margin = 3 * time.Millisecond
	latencyKafkaP99Margin = 8 * time.Millisecond
)

// BenchmarkLatencyKafka measures, at a low update rate, the time from the
// API server answering a ConfigMap update to a client-go informer that
// reads the bridge's Kafka topic (consumer/kafka under a
// consumer.ListerWatcher) handing the change to its event handler, next to
// the time to a client-go informer on the API server handing it to its
// own: what an application moving its informer from the API server to the
// bus would see.
//
// The bridge runs as a child process configured by environment variables,
// with the file checkpoint and the Kafka sink, against an in-process kfake
// cluster of three brokers over TCP. Both informers, and a bare watch for
// comparison, run in one other child process (cmd/observer -kafka), so
// that whatever delays that process delays them alike. One writer updates
// latencyKafkaObjects ConfigMaps in turn, one update every
// latencyKafkaSpacing; each update is matched, by name and
// resourceVersion (on the bus, the annotation that carries it), with both
// informers' events.
//
// The bus informer's delay is split into stages: the API server to the
// bridge's informer handing the change over (the event's time attribute);
// on to a broker receiving the record in a produce request (seen in the
// benchmark's process, which runs the brokers); on to the consumer's Log
// handing the record to its ListerWatcher; and on to the informer's event
// handler.
func BenchmarkLatencyKafka(b *testing.B) {
	ctx := b.Context()

	var bridgeBin, observerBin string
	built := make(chan error, 1)
	bins := b.TempDir()
	go func() {
		var err error
		if bridgeBin, err = buildBinary("github.com/kubebus/bridge/cmd/bridge", bins); err == nil {
			observerBin, err = buildBinary("github.com/kubebus/bridge/test/bench/cmd/observer", bins)
		}
		built <- err
	}()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			b.Error(err)
		}
	})
	kafka := kafkatest.Start(b)
	brokered := newLatencyArrivals()
	kafka.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		now := time.Now()
		if pr, ok := req.(*kmsg.ProduceRequest); ok {
			latencyProduced(pr, func(k latencyKey) { brokered.add(k, latencyArrival{at: now}) })
		}
		return nil, nil, false // the broker handles it as usual
	})

	r := &latencyRig{
		kube:     latencyClient(b, cp.RESTConfig()),
		watch:    newLatencyArrivals(),
		bus:      newLatencyArrivals(),
		informer: newLatencyArrivals(),
	}
	records := newLatencyArrivals()
	if _, err := r.kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: latencyNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", latencyPad)
	for i := range latencyKafkaObjects {
		cm, err := r.kube.CoreV1().ConfigMaps(latencyNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)},
			Data:       map[string]string{"seq": "0", "pad": pad},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		r.objects = append(r.objects, cm)
	}
	if err := <-built; err != nil {
		b.Fatal(err)
	}
	brokers := strings.Join(kafka.Addrs(), ",")
	r.bridge = startChild(b, "bridge", bridgeBin, []string{
		"KUBECONFIG=" + cp.KubeconfigPath(),
		"BRIDGE_SINK=kafka",
		"BRIDGE_KAFKA_BROKERS=" + brokers,
		"BRIDGE_RESOURCES=configmaps",
		"BRIDGE_NAMESPACES=" + latencyNamespace,
		"BRIDGE_CLUSTER_NAME=" + latencyCluster,
		"BRIDGE_CHECKPOINT=file:" + filepath.Join(b.TempDir(), "checkpoint.db"),
		"BRIDGE_METRICS_ADDR=127.0.0.1:0",
		"BRIDGE_LOG_FORMAT=json",
		"GODEBUG=gctrace=1", // its garbage collections, with their pauses
	})
	r.bridge.waitLog(b, "ready", time.Minute)
	observer := startLatencyObserver(b, observerBin, []string{
		"-namespace", latencyNamespace,
		"-kafka", brokers,
		"-cluster", latencyCluster,
	}, cp.KubeconfigPath(), latencyObservers{watch: r.watch, informer: r.informer, bus: r.bus, records: records})

	// One writer, one update every latencyKafkaSpacing, going round the
	// ConfigMaps.
	loadBefore := latencyLoadAverage()
	pid := r.bridge.cmd.Process.Pid
	bridgeSched, observerSched := latencySched(pid), latencySched(observer)
	var writes []latencyWrite
	failed := 0
	began := time.Now()
	t := time.NewTicker(latencyKafkaSpacing)
	for i := range latencyKafkaWarmUp + latencyKafkaRounds*latencyKafkaUpdates {
		if i > 0 {
			select {
			case <-t.C:
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
		start := time.Now()
		k, err := r.update(ctx, i%latencyKafkaObjects)
		if err != nil {
			failed++
			continue
		}
		now := time.Now()
		if i >= latencyKafkaWarmUp {
			writes = append(writes, latencyWrite{key: k, at: now, took: now.Sub(start)})
		}
	}
	t.Stop()
	took := time.Since(began)
	loadAfter := latencyLoadAverage()
	bridgeSched, observerSched = latencySched(pid).since(bridgeSched), latencySched(observer).since(observerSched)
	var pauses []time.Duration
	for _, p := range latencyGCPauses(r.bridge, began, began.Add(took)) {
		pauses = append(pauses, p.d)
	}
	slices.Sort(pauses)
	if failed > 0 {
		b.Errorf("%d updates failed", failed)
	}

	// Wait for both informers to have seen every update.
	unseen := func() (api, bus int) {
		for _, w := range writes {
			if _, ok := r.informer.get(w.key); !ok {
				api++
			}
			if _, ok := r.bus.get(w.key); !ok {
				bus++
			}
		}
		return api, bus
	}
	for deadline := time.Now().Add(latencySettle); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if api, bus := unseen(); api == 0 && bus == 0 {
			break
		}
	}
	if api, bus := unseen(); api > 0 || bus > 0 {
		b.Fatalf("after %s, %d of %d updates had not reached the informer on the API server, %d the informer on the bus",
			latencySettle, api, len(writes), bus)
	}
	for _, a := range []*latencyArrivals{r.watch, r.bus, r.informer, records} {
		a.mu.Lock()
		if a.bad > 0 {
			b.Errorf("the observer reported %d lines that could not be read", a.bad)
		}
		a.mu.Unlock()
	}

	var s latencyKafkaSample
	rounds := make([]latencyWindow, latencyKafkaRounds)
	for i, w := range writes {
		at := w.at.Round(0) // the observer's times are wall clock readings
		api, _ := r.informer.get(w.key)
		bus, _ := r.bus.get(w.key)
		s.api = append(s.api, api.at.Sub(at))
		s.bus = append(s.bus, bus.at.Sub(at))
		rounds[min(i/latencyKafkaUpdates, latencyKafkaRounds-1)].add(api.at.Sub(at), bus.at.Sub(at))
		s.extra = append(s.extra, bus.at.Sub(api.at))
		s.calls = append(s.calls, w.took)
		if we, ok := r.watch.get(w.key); ok {
			s.watch = append(s.watch, we.at.Sub(at))
		}
		rec, ok1 := records.get(w.key)
		br, ok2 := brokered.get(w.key)
		if ok1 && ok2 {
			s.observed = append(s.observed, rec.observed.Sub(at))
			s.brokered = append(s.brokered, br.at.Sub(rec.observed))
			s.fetched = append(s.fetched, rec.at.Sub(br.at))
			s.handled = append(s.handled, bus.at.Sub(rec.at))
		}
	}
	for _, ds := range [][]time.Duration{s.api, s.bus, s.extra, s.watch, s.observed, s.brokered, s.fetched, s.handled, s.calls} {
		slices.Sort(ds)
	}
	b.Logf("%d updates in %s: %s", len(writes), took.Round(time.Millisecond), s)

	ms := func(ds []time.Duration, q float64) float64 { return latencyMillis(latencyPercentile(ds, q)) }
	note := fmt.Sprintf("%d ConfigMap updates in %d rounds of %d, one every %s (%d more before them not counted; the last %d took %s), going round %d ConfigMaps, "+
		"bridge with BRIDGE_SINK=kafka and its defaults against kfake (3 brokers, over TCP); both informers in one process. "+
		"Update calls took %.1f ms at p50 and %.1f ms at p99. 1-minute load average %s then %s on %d CPUs; "+
		"while the updates ran, the bridge's threads %s, the observer's %s, and the bridge's %d GC stop-the-world pauses took at most %.2f ms",
		len(writes), latencyKafkaRounds, latencyKafkaUpdates, latencyKafkaSpacing, latencyKafkaWarmUp, latencyKafkaWarmUp+latencyKafkaRounds*latencyKafkaUpdates, took.Round(time.Millisecond),
		latencyKafkaObjects, ms(s.calls, 0.5), ms(s.calls, 0.99), loadBefore, loadAfter, runtime.NumCPU(),
		bridgeSched, observerSched, len(pauses), ms(pauses, 1))
	for _, q := range []struct {
		name   string
		q      float64
		margin time.Duration
	}{{"p50", 0.5, latencyKafkaP50Margin}, {"p99", 0.99, latencyKafkaP99Margin}} {
		f := Figure{
			Scenario:     latencyScenario,
			Name:         q.name + ", ConfigMap update to Kafka consumer informer",
			Unit:         "ms",
			Bridge:       ms(s.bus, q.q),
			Baseline:     ms(s.api, q.q),
			BaselineName: latencyKafkaBaselineName,
			Difference:   true,
			Note: note + fmt.Sprintf(". Per update, the bus informer's delay minus the API server informer's: %s %.1f ms. "+
				"Each stage's %s, over the %d updates whose record a broker was seen receiving: the API server to the bridge's informer %.1f ms, on to a broker receiving the record %.1f ms, "+
				"on to the consumer's Log handing it over %.1f ms, on to the informer's handler %.1f ms. A bare watch on the API server: %s %.1f ms. "+
				"The spread is the figure in each round of %d updates",
				q.name, ms(s.extra, q.q), q.name, len(s.observed), ms(s.observed, q.q), ms(s.brokered, q.q), ms(s.fetched, q.q), ms(s.handled, q.q),
				q.name, ms(s.watch, q.q), latencyKafkaUpdates),
		}
		f.Judge(fmt.Sprintf("≤ baseline + %d ms", q.margin.Milliseconds()), AtMost(latencyMillis(q.margin)), f.Bridge-f.Baseline, latencyWindowDiffs(rounds, q.q))
		record(b, f)
	}
}

// latencyKafkaSample is what BenchmarkLatencyKafka measured, every
// duration sorted.
type latencyKafkaSample struct {
	// api and bus are the delays from an update's answer to the informer
	// on the API server and to the one on the bus; extra is, per update,
	// the second minus the first; watch, to a bare watch.
	api, bus, extra, watch []time.Duration
	// The bus informer's delay in stages: from the update's answer to the
	// bridge's informer handing the change over (the event's time); on to
	// a broker receiving the record; on to the consumer's Log handing it
	// to its ListerWatcher; on to the informer's event handler.
	observed, brokered, fetched, handled []time.Duration
	// calls are how long the update calls took.
	calls []time.Duration
}

func (s latencyKafkaSample) String() string {
	ms := func(ds []time.Duration, q float64) float64 { return latencyMillis(latencyPercentile(ds, q)) }
	return fmt.Sprintf("API server informer p50 %.1f ms p99 %.1f ms; bus informer p50 %.1f ms p99 %.1f ms max %.1f ms; "+
		"bus minus API server p50 %.1f ms p99 %.1f ms; bare watch p50 %.1f ms p99 %.1f ms; stages (%d samples): to the bridge's informer p50 %.1f ms p99 %.1f ms, "+
		"to a broker p50 %.1f ms p99 %.1f ms, to the consumer's Log p50 %.1f ms p99 %.1f ms, to the handler p50 %.1f ms p99 %.1f ms; update call p50 %.1f ms p99 %.1f ms",
		ms(s.api, 0.5), ms(s.api, 0.99), ms(s.bus, 0.5), ms(s.bus, 0.99), ms(s.bus, 1),
		ms(s.extra, 0.5), ms(s.extra, 0.99), ms(s.watch, 0.5), ms(s.watch, 0.99), len(s.observed),
		ms(s.observed, 0.5), ms(s.observed, 0.99), ms(s.brokered, 0.5), ms(s.brokered, 0.99),
		ms(s.fetched, 0.5), ms(s.fetched, 0.99), ms(s.handled, 0.5), ms(s.handled, 0.99),
		ms(s.calls, 0.5), ms(s.calls, 0.99))
}

// get returns the arrival of k, if there was one.
func (a *latencyArrivals) get(k latencyKey) (latencyArrival, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[k]
	return at, ok
}

// latencyProduced calls fn with the object name and API resourceVersion of
// every event record in req: those whose key is "namespace/name" (or
// "name") and that carry the ce_resourceversion header. Records of
// compressed batches are skipped, as the bridge compresses none by
// default.
func latencyProduced(req *kmsg.ProduceRequest, fn func(latencyKey)) {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for raw := p.Records; len(raw) >= 12; {
				// A batch is its base offset (8 bytes), its length (4)
				// and that many bytes.
				n := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
				if n <= 12 || n > len(raw) {
					break
				}
				var batch kmsg.RecordBatch
				err := batch.ReadFrom(raw[:n])
				raw = raw[n:]
				if err != nil || batch.Attributes&0x07 != 0 {
					continue
				}
				latencyBatchRecords(batch, fn)
			}
		}
	}
}

// latencyBatchRecords is latencyProduced for one uncompressed batch.
func latencyBatchRecords(batch kmsg.RecordBatch, fn func(latencyKey)) {
	recs := batch.Records
	for range batch.NumRecords {
		// A record is its length (a zigzag varint) and that many bytes.
		l, w := binary.Varint(recs)
		if w <= 0 || l < 0 || int(l)+w > len(recs) {
			return
		}
		var rec kmsg.Record
		err := rec.ReadFrom(recs[:w+int(l)])
		recs = recs[w+int(l):]
		if err != nil {
			return
		}
		key := string(rec.Key)
		name := key[strings.LastIndexByte(key, '/')+1:]
		for _, h := range rec.Headers {
			if h.Key == "ce_resourceversion" && name != "" {
				fn(latencyKey{name, string(h.Value)})
			}
		}
	}
}
