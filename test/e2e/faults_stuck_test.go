package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubebus/bridge/test/poll"
)

// The stuck-sink scenario's figures. Every change in it is an update, so
// without collapsing every one of them would wait in memory.
const (
	// stuckObjects is how many distinct objects are churned.
	stuckObjects = 150
	// stuckUpdatesPerObject is how many times each is updated while the
	// sink accepts nothing: far more than stuckMaxPending.
	stuckUpdatesPerObject = 50
	// stuckPayload is the size of each object's data.
	stuckPayload = 4 << 10
	// stuckMaxPending is BRIDGE_MAX_PENDING_PER_OBJECT for the scenario:
	// small, so that the bound it implies is far below what keeping every
	// change would cost, with a churn this machine makes in seconds.
	stuckMaxPending = 4
	// versionAllowance bounds the heap one retained version of an object
	// holds: the object decoded from its watch event (the payload, the
	// metadata and the maps around them) and its delta. The test checks it
	// against what decoding one version really allocates.
	versionAllowance = stuckPayload + 4<<10
	// attributesAllowance bounds a message held at the gate, apart from
	// its data (which the gate counts): the struct and its attribute
	// strings (id, source, type, subject, uid, names).
	attributesAllowance = 1 << 10
	// objectAllowance is the per-object bookkeeping outside the versions:
	// the pipeline's entry and key, the work queue's entry.
	objectAllowance = 1 << 10
	// heapSlack absorbs what the rest of the process (the in-process bus,
	// the API clients' buffers, the runtime) may hold more at the second
	// measurement; it does not grow with the changes.
	heapSlack = 2 << 20
)

// While the sink accepts nothing, churn a fixed set of objects with far
// more updates than objects: the bridge's memory grows with the objects,
// not with the changes, and once the sink is back every object's latest
// state is delivered.
//
// The sink is the bus's real sink behind a gate. Every object gets a
// worker (BRIDGE_WORKERS above the number of objects, one object per
// batch), so each has its first update stuck in a publish at the gate and
// the rest waiting in the pipeline; a spare worker carries a probe object,
// whose batches the gate lets through. The probe is updated after the
// churn: once the sink has it, the bridge has handed every earlier change
// to the pipeline (one watch, one handler, in resourceVersion order), and
// the heap is measured then.
func TestFaultStuckSink(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "stuck-"+b.name())
		env := maps.Clone(b.env(ns))
		env["BRIDGE_MAX_PENDING_PER_OBJECT"] = strconv.Itoa(stuckMaxPending)
		env["BRIDGE_WORKERS"] = strconv.Itoa(stuckObjects + 4)
		env["BRIDGE_BATCH_SIZE"] = "1"
		gate := &gateSink{Sink: busSink(t, env), probe: ns + "/probe"}
		br := startBridge(t, env, gate)

		cms := fastKube(t).CoreV1().ConfigMaps(ns)
		probe, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		objs := createChurned(t, cms, stuckObjects)
		// Everything is on the bus. (Nothing reads the bus before the
		// heap is measured: readers hold buffers and clients.)
		poll.Until(t, time.Minute, func() (bool, string) {
			n := gate.accepted()
			return n == stuckObjects+1, fmt.Sprintf("the sink accepted %d of %d objects", n, stuckObjects+1)
		})

		perVersion := decodeCost(t, objs[0])
		if perVersion > versionAllowance {
			t.Fatalf("decoding one version allocates %d bytes, above the %d allowed per version: raise versionAllowance",
				perVersion, versionAllowance)
		}

		// The sink gets stuck. The first measurement has every object in
		// the informer cache and nothing waiting.
		gate.shut()
		heap0 := liveHeap()

		began := time.Now()
		var made atomic.Int64
		const writers = 8
		parallel(t, writers, writers, func(ctx context.Context, w int) error {
			for round := 1; round <= stuckUpdatesPerObject; round++ {
				for i := w; i < stuckObjects; i += writers {
					cm := objs[i].DeepCopy()
					cm.Data = stuckData(i, round)
					up, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
					if err != nil {
						return fmt.Errorf("update %s: %w", cm.Name, err)
					}
					objs[i] = up
					made.Add(1)
				}
			}
			return nil
		})
		changes := int(made.Load())
		churnTook := time.Since(began)
		probe.Data = map[string]string{"after": "churn"}
		if probe, err = cms.Update(t.Context(), probe, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, time.Minute, func() (bool, string) {
			at := gate.probeAt()
			return at == probe.ResourceVersion, fmt.Sprintf("the sink has the probe at %q, not yet at %s", at, probe.ResourceVersion)
		})
		seenTook := time.Since(began)

		// The sink took nothing else, and still holds what it was handed
		// when it got stuck.
		calls, held, heldBytes := gate.waiting()
		if calls == 0 {
			t.Fatal("no publish waiting at the shut gate: the bridge saw no change")
		}
		// The bound is on the live heap (HeapAlloc right after a
		// collection): what the process still references. HeapInuse is
		// logged too; it also counts the free slots that thousands of
		// collected versions leave in partly used spans, which is the
		// allocator's business, not something the bridge holds.
		heap1 := liveHeap()
		growth := int64(heap1.HeapAlloc) - int64(heap0.HeapAlloc)
		bound := int64(stuckObjects)*(stuckMaxPending*versionAllowance+objectAllowance) +
			int64(held)*(versionAllowance+attributesAllowance) + int64(heldBytes) + heapSlack
		// What keeping every change would cost, at the least: each version
		// holds its own copy of the payload.
		unbounded := int64(changes) * stuckPayload
		t.Logf("%s: %d changes to %d objects in %s while the sink was stuck, all seen by the bridge after %s; %d publishes holding %d messages (%d KiB of data) at the gate",
			b.name(), changes, stuckObjects, churnTook.Round(time.Millisecond), seenTook.Round(time.Millisecond), calls, held, heldBytes>>10)
		t.Logf("%s: heap in use %.1f -> %.1f MiB, live %.1f -> %.1f MiB: growth %.2f MiB, %d bytes per object; bound %.1f MiB "+
			"(a version costs %d bytes to decode, %d allowed); keeping every change would take at least %.1f MiB",
			b.name(), mib(int64(heap0.HeapInuse)), mib(int64(heap1.HeapInuse)), mib(int64(heap0.HeapAlloc)), mib(int64(heap1.HeapAlloc)),
			mib(growth), growth/stuckObjects, mib(bound), perVersion, versionAllowance, mib(unbounded))
		if unbounded < 3*bound {
			t.Fatalf("keeping every change (%.1f MiB) would not exceed the bound (%.1f MiB) by a wide margin: the scenario cannot tell collapsing from buffering",
				mib(unbounded), mib(bound))
		}
		if growth > bound {
			t.Errorf("heap grew by %.1f MiB while the sink was stuck, above the %.1f MiB bound for %d objects",
				mib(growth), mib(bound), stuckObjects)
		}

		// The sink comes back: every object's latest state is delivered.
		gate.open()
		_, took := newBusReader(t, b, ns).converge(t, time.Minute)
		// Stopped, the bridge publishes nothing more: the final verdict
		// counts every event the bus holds.
		br.stop(t)
		after := checkBus(t, b, ns, "after the bridge stopped")
		delivered := after.events - (stuckObjects + 1) - 1 // less the creates and the probe's update
		t.Logf("%s: converged %s after the sink came back; %d events for %d changes (%d collapsed); %d duplicates",
			b.name(), took.Round(time.Millisecond), delivered, changes, changes-delivered, after.duplicates)
		// Collapsing, seen from the stream: per object at most
		// stuckMaxPending waiting versions, plus what the gate held.
		if most := stuckObjects*stuckMaxPending + held; delivered-after.duplicates > most {
			t.Errorf("%d events delivered for %d changes to %d objects, more than the %d that collapsing allows",
				delivered-after.duplicates, changes, stuckObjects, most)
		}
	})
}

// createChurned creates n ConfigMaps, cm-000 onwards, with stuckData's
// round 0, and returns them as created.
func createChurned(t *testing.T, cms typedcorev1.ConfigMapInterface, n int) []*corev1.ConfigMap {
	t.Helper()
	objs := make([]*corev1.ConfigMap, n)
	parallel(t, 8, n, func(ctx context.Context, i int) error {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)},
			Data:       stuckData(i, 0),
		}, metav1.CreateOptions{})
		objs[i] = cm
		return err
	})
	return objs
}

// stuckData is object i's data at round r: a payload of stuckPayload bytes
// that differs in every version.
func stuckData(i, r int) map[string]string {
	head := fmt.Sprintf("object %d round %d ", i, r)
	return map[string]string{
		"round":   strconv.Itoa(r),
		"payload": head + strings.Repeat("x", stuckPayload-len(head)),
	}
}

// decodeCost is how many bytes decoding cm the way the bridge's informer
// does (JSON into an unstructured object) allocates: an upper bound of
// what one retained version holds. It is the least of a few rounds, since
// the rest of the process allocates meanwhile.
func decodeCost(t *testing.T, cm *corev1.ConfigMap) int64 {
	t.Helper()
	cm = cm.DeepCopy()
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	raw, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	least := int64(-1)
	for range 5 {
		keep := make([]*unstructured.Unstructured, n)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i := range keep {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			keep[i] = u
		}
		runtime.ReadMemStats(&m1)
		runtime.KeepAlive(keep)
		if c := int64(m1.TotalAlloc-m0.TotalAlloc) / n; least < 0 || c < least {
			least = c
		}
	}
	return least
}

// parallel runs f(ctx, 0..n-1) on workers goroutines and fails the test
// with the first error; ctx ends at the first error.
func parallel(t *testing.T, workers, n int, f func(ctx context.Context, i int) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
