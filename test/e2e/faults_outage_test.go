package e2e

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/test/poll"
)

// The outage's figures.
const (
	// outageObjects is how many ConfigMaps the writers churn.
	outageObjects = 100
	// outageChanges is how many changes are made while the broker is down.
	outageChanges = 300
	outageSeed    = 11
)

// Issue 5, broker outage: while writers churn, the broker stops, and comes
// back with what it had stored. The bridge, never restarted, reports the
// outage through its readiness and recovers by itself: once the broker is
// back, readiness is nil again and the bus's view equals the API server's
// LIST, with no resourceVersion going backwards. JetStream holds no
// duplicate (it drops a repeat of a write whose ack was lost); Kafka may
// hold a write the broker stored just as it went away twice, but only in a
// row. After a graceful stop the checkpoint holds every live object at its
// current resourceVersion and nothing else.
func TestFaultBrokerOutage(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "fault-outage-"+b.name())
		env := maps.Clone(b.env(ns))
		env["BRIDGE_CHECKPOINT_INTERVAL"] = "500ms"
		// Retries and reconnects close together, so that recovery is
		// quick to see; the defaults (30s, 10s) would only make it slower.
		env["BRIDGE_RETRY_MAX_INTERVAL"] = "500ms"
		if b.name() == "nats" {
			env["BRIDGE_NATS_RECONNECT_MAX_WAIT"] = "500ms"
		}
		r := startBridge(t, env, nil)
		probe := newBusProbe(t, b, ns)
		ready := watchReadiness(r.b)
		w := startChurners(t, ns, outageObjects, 2, outageSeed)

		probe.waitGrown(t, 0, 200, "before the outage")
		if err := r.b.Readiness(); err != nil {
			t.Fatalf("not ready before the outage: %v", err)
		}
		before := w.made.Load()
		b.stop(t)
		down := time.Now()
		poll.Until(t, 30*time.Second, func() (bool, string) {
			return r.b.Readiness() != nil, "still ready with the broker down"
		})
		noticed := time.Since(down)
		reason := r.b.Readiness()
		w.waitMade(t, before, outageChanges, "while the broker is down")
		if kb, ok := b.(*kafkaBus); ok && kb.refused.Load() == 0 {
			t.Fatal("the cluster refused no request during the outage")
		}
		if len(r.done) > 0 {
			t.Fatal("the bridge stopped during the outage")
		}
		during := w.made.Load() - before

		b.start(t)
		up := time.Now()
		outage := up.Sub(down)
		poll.Until(t, 60*time.Second, func() (bool, string) {
			err := r.b.Readiness()
			return err == nil, fmt.Sprintf("not ready after the broker came back: %v", err)
		})
		recovered := time.Since(up)
		// The stream flows again while the writers go on.
		back := probe.count()
		probe.waitGrown(t, back, 100, "after the outage")
		made := w.stop()
		v, msgs := settleOracle(t, b, ns, probe, 60*time.Second)
		caughtUp := time.Since(up)
		if v.mismatch != "" {
			t.Errorf("the view does not converge on the LIST after the outage: %s%s", v.mismatch, explainMismatch(t, ns, msgs, nil))
		}
		if len(r.done) > 0 {
			t.Fatal("the bridge stopped after the outage")
		}
		flips := ready.stop()
		r.stop(t)

		checkOrder(t, b, v, msgs)
		refused := ""
		if kb, ok := b.(*kafkaBus); ok {
			refused = fmt.Sprintf(", %d requests refused", kb.refused.Load())
		}
		t.Logf("%s: outage of %s with %d of %d changes made during it%s; readiness said %q %s after the broker stopped, "+
			"and nil %s after it came back; view equal to the LIST %s after it came back (%d events, %d duplicates); readiness: %s",
			b.name(), outage.Round(time.Millisecond), during, made, refused, reason, noticed.Round(time.Millisecond),
			recovered.Round(time.Millisecond), caughtUp.Round(time.Millisecond), v.events, v.duplicates, flips)

		// Readiness went from nil to an error once, during the outage,
		// and back once, after it: no flapping, and no nil while the
		// broker was down.
		if len(flips) != 3 || flips[0].err != nil || flips[1].err == nil || flips[2].err != nil {
			t.Errorf("readiness went %s; want nil, then an error during the outage, then nil", flips)
		} else {
			if flips[1].at.Before(down) {
				t.Errorf("readiness failed at %s, before the outage began", flips[1].at.Sub(down))
			}
			if flips[2].at.Before(up) {
				t.Errorf("readiness was nil again %s before the broker came back", up.Sub(flips[2].at))
			}
		}

		// Graceful stop: the checkpoint holds exactly the live objects,
		// each at its resourceVersion.
		ckpt := readCheckpoint(t, b, ns)
		list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ckpt.Objects) != len(list.Items) {
			t.Errorf("checkpoint holds %d objects, the API server %d", len(ckpt.Objects), len(list.Items))
		}
		for _, cm := range list.Items {
			key := ns + "/" + cm.Name
			if pos := ckpt.Objects[key]; pos.UID != string(cm.UID) || pos.ResourceVersion != cm.ResourceVersion {
				t.Errorf("checkpoint of %s: %+v, the API server has uid %s at %s", key, pos, cm.UID, cm.ResourceVersion)
			}
		}
	})
}

// readinessFlip is a change of what Readiness returned, and when.
type readinessFlip struct {
	at  time.Time
	err error
}

type readinessFlips []readinessFlip

func (fs readinessFlips) String() string {
	var parts []string
	for i, f := range fs {
		what := "nil"
		if f.err != nil {
			what = "error"
		}
		if i == 0 {
			parts = append(parts, what)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (+%s)", what, f.at.Sub(fs[i-1].at).Round(time.Millisecond)))
	}
	return strings.Join(parts, " -> ")
}

// readinessWatch polls a bridge's Readiness in the background and keeps
// each change of it.
type readinessWatch struct {
	quit  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	flips readinessFlips
}

// watchReadiness starts polling b's Readiness every 50ms, as a probe
// would (more often than most).
func watchReadiness(b *bridge.Bridge) *readinessWatch {
	w := &readinessWatch{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			err := b.Readiness()
			w.mu.Lock()
			if n := len(w.flips); n == 0 || (w.flips[n-1].err == nil) != (err == nil) {
				w.flips = append(w.flips, readinessFlip{time.Now(), err})
			}
			w.mu.Unlock()
			select {
			case <-w.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop stops polling and returns the changes seen.
func (w *readinessWatch) stop() readinessFlips {
	close(w.quit)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flips
}
