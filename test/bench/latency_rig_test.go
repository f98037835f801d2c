package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/controlplane"
)

const (
	// latencyNamespace holds the ConfigMaps the writers update.
	latencyNamespace = "latency"
	// latencyObjects is how many ConfigMaps the writes are spread over.
	latencyObjects = 512
	// latencyWriters update in parallel; each owns latencyObjects /
	// latencyWriters of the ConfigMaps, so writes never conflict.
	latencyWriters = 64
	// latencyPad is the size of the filler value in each ConfigMap, so
	// that messages are of a common size rather than tiny.
	latencyPad = 512
	// latencyCluster names the cluster in subjects and events.
	latencyCluster = "bench"
)

// latencyKey is one change: the object's name and its new
// resourceVersion.
type latencyKey struct{ name, rv string }

// latencyArrival is when an observer saw a change. All three are wall
// clock readings, from the processes that took them.
type latencyArrival struct {
	at time.Time
	// For messages from the bridge: observed is the event's time, when the
	// bridge's informer handed it the change; stored is when the NATS
	// server stored the message.
	observed, stored time.Time
}

// latencyArrivals are when an observer saw each change.
type latencyArrivals struct {
	mu  sync.Mutex
	at  map[latencyKey]latencyArrival
	bad int // lines about it that could not be read
}

func newLatencyArrivals() *latencyArrivals {
	return &latencyArrivals{at: map[latencyKey]latencyArrival{}}
}

// add keeps the first arrival of each change.
func (a *latencyArrivals) add(k latencyKey, at latencyArrival) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.at[k]; !seen {
		a.at[k] = at
	}
}

// latencyWrite is one update, timed when the API server's answer came
// back.
type latencyWrite struct {
	key latencyKey
	at  time.Time
	// took is how long the update call took.
	took time.Duration
}

// latencyRig is the scenario's set-up: a control plane; a NATS server, a
// child process (cmd/natsserver), as a broker is in production: in this
// process it would wait for a CPU behind the writers' goroutines, which
// only the bridge's path goes through; the bridge, a child process,
// publishing the ConfigMaps of one namespace to it; and a consumer, another child process
// (cmd/observer), that subscribes to the bridge's stream and watches the
// same ConfigMaps with a bare client-go watch. The consumer times every
// change each way, by name and resourceVersion: both observers share its
// process, so whatever delays that process delays both alike.
type latencyRig struct {
	kube   kubernetes.Interface
	bridge *child
	// apiServer and observer are the kube-apiserver's and the
	// consumer's pids.
	apiServer, observer int
	// objects holds the latest state of each ConfigMap as its writer last
	// saw it.
	objects []*corev1.ConfigMap
	watch   *latencyArrivals // the bare watch
	bus     *latencyArrivals // the subscription to the bridge's stream
	// informer is a bare client-go informer in the consumer's process,
	// for diagnosis: the bridge is built on client-go's informers.
	informer *latencyArrivals
}

// startLatencyRig sets up everything and returns once the bridge has
// published the initial state and both observers are listening.
func startLatencyRig(b *testing.B, bridgeEnv map[string]string) *latencyRig {
	b.Helper()
	ctx := b.Context()

	// The bridge and the consumer build while the control plane starts.
	var bridgeBin, observerBin, natsBin string
	built := make(chan error, 1)
	bins := b.TempDir()
	go func() {
		var err error
		if bridgeBin, err = buildBinary("github.com/kubebus/bridge/cmd/bridge", bins); err == nil {
			if observerBin, err = buildBinary("github.com/kubebus/bridge/test/bench/cmd/observer", bins); err == nil {
				natsBin, err = buildBinary("github.com/kubebus/bridge/test/bench/cmd/natsserver", bins)
			}
		}
		built <- err
	}()
	began := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			b.Error(err)
		}
	})
	b.Logf("control plane ready in %s", time.Since(began).Round(time.Millisecond))

	r := &latencyRig{
		kube:     latencyClient(b, cp.RESTConfig()),
		watch:    newLatencyArrivals(),
		bus:      newLatencyArrivals(),
		informer: newLatencyArrivals(),
	}
	if _, err := r.kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: latencyNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", latencyPad)
	for i := range latencyObjects {
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
	natsURL := startLatencyNATS(b, natsBin)
	env := map[string]string{
		"KUBECONFIG":          cp.KubeconfigPath(),
		"BRIDGE_SINK":         "nats",
		"BRIDGE_NATS_URL":     natsURL,
		"BRIDGE_RESOURCES":    "configmaps",
		"BRIDGE_NAMESPACES":   latencyNamespace,
		"BRIDGE_CLUSTER_NAME": latencyCluster,
		"BRIDGE_CHECKPOINT":   "file:" + filepath.Join(b.TempDir(), "checkpoint.db"),
		"BRIDGE_METRICS_ADDR": "127.0.0.1:0",
		"BRIDGE_LOG_FORMAT":   "json",
		// The bridge's garbage collections, each with its pauses, on
		// standard error: one line per collection.
		"GODEBUG": "gctrace=1",
	}
	maps.Copy(env, bridgeEnv)
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	r.apiServer = cp.APIServerPID()
	r.bridge = startChild(b, "bridge", bridgeBin, environ)
	r.bridge.waitLog(b, "ready", time.Minute)

	r.observer = startLatencyObserver(b, observerBin, []string{
		"-namespace", latencyNamespace,
		"-nats", natsURL,
		"-stream", "KUBE",
		"-subject", "kube." + latencyCluster + ".core.configmaps." + latencyNamespace + ".>",
	}, cp.KubeconfigPath(), latencyObservers{watch: r.watch, informer: r.informer, bus: r.bus})
	return r
}

// latencyClient is a client without client-side rate limiting, for the
// writers.
func latencyClient(b *testing.B, rc *rest.Config) kubernetes.Interface {
	b.Helper()
	rc.QPS = -1
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// write updates the ConfigMaps at rate updates per second in total for d,
// each writer paced by a ticker and owning its own ConfigMaps, and returns
// every update that succeeded with the time its answer came back, and how
// many failed.
func (r *latencyRig) write(ctx context.Context, rate float64, d time.Duration) ([]latencyWrite, int) {
	period := time.Duration(float64(time.Second) * latencyWriters / rate)
	start := time.Now()
	end := start.Add(d)
	var (
		mu     sync.Mutex
		writes []latencyWrite
		failed int
		wg     sync.WaitGroup
	)
	for w := range latencyWriters {
		wg.Go(func() {
			var mine []latencyWrite
			bad := 0
			defer func() {
				mu.Lock()
				writes = append(writes, mine...)
				failed += bad
				mu.Unlock()
			}()
			// Writers start evenly spread over one period.
			select {
			case <-time.After(period * time.Duration(w) / latencyWriters):
			case <-ctx.Done():
				return
			}
			t := time.NewTicker(period)
			defer t.Stop()
			next := w // index into r.objects of this writer's next ConfigMap
			for first := true; ; first = false {
				if !first {
					select {
					case <-t.C:
					case <-ctx.Done():
						return
					}
				}
				if time.Now().After(end) {
					return
				}
				began := time.Now()
				k, err := r.update(ctx, next)
				if err != nil {
					bad++
				} else {
					now := time.Now()
					mine = append(mine, latencyWrite{key: k, at: now, took: now.Sub(began)})
				}
				next += latencyWriters
				if next >= len(r.objects) {
					next = w
				}
			}
		})
	}
	wg.Wait()
	return writes, failed
}

// update changes ConfigMap i and returns its new name and resourceVersion.
// Only one writer updates each ConfigMap, so the resourceVersion it holds is
// current; after a failure it reads the ConfigMap again.
func (r *latencyRig) update(ctx context.Context, i int) (latencyKey, error) {
	cms := r.kube.CoreV1().ConfigMaps(latencyNamespace)
	cm := r.objects[i].DeepCopy()
	seq, _ := strconv.Atoi(cm.Data["seq"])
	cm.Data["seq"] = strconv.Itoa(seq + 1)
	got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		if fresh, gerr := cms.Get(ctx, cm.Name, metav1.GetOptions{}); gerr == nil {
			r.objects[i] = fresh
		}
		return latencyKey{}, err
	}
	r.objects[i] = got
	return latencyKey{got.Name, got.ResourceVersion}, nil
}

// settle waits until both observers have seen every write, or until
// timeout.
func (r *latencyRig) settle(writes []latencyWrite, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if missWatch, missBus := r.missing(writes); missWatch == 0 && missBus == 0 {
			return
		}
	}
}

// missing counts the writes each observer has not seen.
func (r *latencyRig) missing(writes []latencyWrite) (watchMissing, busMissing int) {
	for _, a := range []*latencyArrivals{r.watch, r.bus} {
		a.mu.Lock()
		n := 0
		for _, w := range writes {
			if _, ok := a.at[w.key]; !ok {
				n++
			}
		}
		a.mu.Unlock()
		if a == r.watch {
			watchMissing = n
		} else {
			busMissing = n
		}
	}
	return watchMissing, busMissing
}
