package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Restart kube-apiserver (etcd keeps its data) while objects churn:
// nothing is lost. Once the churn stops, the stream's view equals the
// API server's LIST, and no object's resourceVersion goes backwards.
func TestFaultAPIServerRestart(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		// The control plane is the whole package's: whatever happens here,
		// leave it answering. Registered first, so it runs last.
		t.Cleanup(func() { ensureAPIServer(t) })

		ns := namespace(t, "apirestart-"+b.name())
		br := startBridge(t, b.env(ns), nil)
		reader := newBusReader(t, b, ns)

		ctx, stopChurn := context.WithCancel(t.Context())
		w := &outageWriter{ns: ns, n: 40, seed: 7}
		var wg sync.WaitGroup
		wg.Go(func() { w.run(ctx, t) })
		defer wg.Wait()
		defer stopChurn()

		// The stream flows before the restart.
		waitEvents(t, reader, func(msgs []*wire.Message) bool { return len(msgs) >= 50 }, "50 events before the restart")

		madeBefore := w.made.Load()
		began := time.Now()
		rctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		err := cp.RestartAPIServer(rctx)
		cancel()
		if err != nil {
			t.Fatalf("restart kube-apiserver: %v\n%s", err, cp.LogTails())
		}
		restartTook := time.Since(began)
		ensureAPIServer(t)
		back := time.Now()

		// A change made after the restart reaches the bus: the bridge's
		// watch is back.
		madeAtBack, rvAtBack := w.made.Load(), w.newest()
		var after string
		poll.Until(t, time.Minute, func() (bool, string) {
			after = w.newest()
			return rvAtBack == "" || rvLess(rvAtBack, after), fmt.Sprintf("no object written after the restart (%d writes failed)", w.failed.Load())
		})
		waitEvents(t, reader, func(msgs []*wire.Message) bool {
			return slices.ContainsFunc(msgs, func(m *wire.Message) bool { return !rvLess(m.ResourceVersion, after) })
		}, "a change made after the restart (at "+after+")")
		resumed := time.Since(back)
		// And so do many more.
		poll.Until(t, time.Minute, func() (bool, string) {
			n := w.made.Load() - madeAtBack
			return n >= 100, fmt.Sprintf("%d of 100 changes made after the restart", n)
		})
		stopChurn()
		wg.Wait()

		_, converged := reader.converge(t, 2*time.Minute)
		br.stop(t)
		msgs := b.read(t, ns)
		v := oracle(t, ns, msgs)
		if v.mismatch != "" {
			t.Errorf("after the bridge stopped: %s", v.mismatch)
		}
		if len(v.backwards) > 0 {
			t.Errorf("resourceVersions went backwards: %s", strings.Join(v.backwards, "; "))
		}
		if other := w.unexpected(); other != "" {
			t.Errorf("writes failed other than for the API server being away: %s", other)
		}
		snapshots := 0
		for _, m := range msgs {
			if m.Snapshot {
				snapshots++
			}
		}
		t.Logf("%s: %d changes (%d before the restart began, %d during or after it), %d writes failed while the API server was away; "+
			"the restart took %s; a change made after it was on the bus %s later (polled every 250ms); converged %s after the churn stopped",
			b.name(), w.made.Load(), madeBefore, w.made.Load()-madeBefore, w.failed.Load(),
			restartTook.Round(time.Millisecond), resumed.Round(time.Millisecond), converged.Round(time.Millisecond))
		t.Logf("%s: %d events for %d changes (%d found by a relist, marked snapshot; the versions a relist skips are not published), %d duplicates",
			b.name(), v.events, w.made.Load(), snapshots, v.duplicates)
	})
}

// waitEvents waits until the events on the bus satisfy ok, reading the
// bus at most every 250ms.
func waitEvents(t *testing.T, r *busReader, ok func([]*wire.Message) bool, what string) {
	t.Helper()
	var (
		last time.Time
		done bool
	)
	poll.Until(t, time.Minute, func() (bool, string) {
		if time.Since(last) >= 250*time.Millisecond {
			last = time.Now()
			done = ok(r.read(t))
		}
		return done, "waiting for " + what + " on the bus"
	})
}

// ensureAPIServer waits until the shared API server answers, restarting it
// if it does not (a failed restart leaves none running).
func ensureAPIServer(t *testing.T) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, last = kube(t).CoreV1().Namespaces().List(rctx, metav1.ListOptions{Limit: 1})
			return last == nil, nil
		})
	if err == nil {
		return
	}
	t.Logf("kube-apiserver does not answer (%v); restarting it", last)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Errorf("kube-apiserver left unhealthy: %v\n%s", err, cp.LogTails())
	}
}

// outageWriter creates, updates and deletes ConfigMaps ao-00..ao-(n-1)
// at random until its context ends, riding out an API server that goes
// away and comes back. A write that fails because the server cannot be
// reached or is not serving is counted in failed and not retried: it may
// or may not have been made, and the oracle compares with the LIST anyway.
// Only writes that the API server confirmed count in made.
type outageWriter struct {
	ns   string
	n    int
	seed uint64

	made, failed atomic.Int64

	mu    sync.Mutex
	other []error // failures of any other kind
	newRV string  // resourceVersion of the newest object written
}

// newest is the resourceVersion of the last object created or updated.
func (w *outageWriter) newest() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newRV
}

func (w *outageWriter) run(ctx context.Context, t *testing.T) {
	cms := kube(t).CoreV1().ConfigMaps(w.ns)
	rng := rand.New(rand.NewPCG(w.seed, w.seed))
	for ctx.Err() == nil {
		name := fmt.Sprintf("ao-%02d", rng.IntN(w.n))
		op := rng.IntN(10)
		// A request to a server that is going away must not hang.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var (
			err     error
			written *corev1.ConfigMap
		)
		if op < 2 {
			err = cms.Delete(rctx, name, metav1.DeleteOptions{})
		} else {
			var cm *corev1.ConfigMap
			cm, err = cms.Get(rctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				written, err = cms.Create(rctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
			} else if err == nil {
				cm.Data = map[string]string{"n": fmt.Sprint(w.made.Load())}
				written, err = cms.Update(rctx, cm, metav1.UpdateOptions{})
			}
		}
		cancel()
		switch {
		case err == nil:
			if written != nil {
				w.mu.Lock()
				w.newRV = written.ResourceVersion
				w.mu.Unlock()
			}
			w.made.Add(1)
		case ctx.Err() != nil:
		case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		case serverAway(err):
			w.failed.Add(1)
		default:
			w.mu.Lock()
			w.other = append(w.other, err)
			w.mu.Unlock()
		}
	}
}

// unexpected describes the failures that were not the server being away,
// or is "" when there were none.
func (w *outageWriter) unexpected() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.other) == 0 {
		return ""
	}
	var s []string
	for _, err := range w.other[:min(len(w.other), 5)] {
		s = append(s, err.Error())
	}
	return fmt.Sprintf("%d, such as: %s", len(w.other), strings.Join(s, "; "))
}

// serverAway reports whether err says the API server could not be reached
// or was not serving: refused or broken connections, timeouts, and the
// statuses a server that is stopping or starting answers with.
func serverAway(err error) bool {
	switch {
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return true
	case errors.As(err, new(apierrors.APIStatus)):
		return false // any other answer from a serving API server
	}
	var ne net.Error
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
