package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// expiryConvergeTimeout bounds how long the bridge may take to catch up
// once the API server is reachable again. It is not how long a relist
// takes (a few milliseconds) but client-go's reflector backoff: while the
// API server is unreachable, each failed watch waits longer before the
// next, up to 30s plus up to 100% jitter, so after a long outage the watch
// that gets 410 Gone may come up to 60s after the resume, and the relist
// that follows it up to 60s after that.
const expiryConvergeTimeout = 3 * time.Minute

// Issue 5, watch expiry: the bridge's watch position becomes too old. The
// bridge reaches the API server through a proxy, which is cut: its watch
// breaks and its reconnects are refused. Meanwhile 15 objects change
// (5 updated, one of them three times; 5 deleted; 5 created), etcd is
// compacted past them, and the API server restarts, so that its watch
// cache starts from the present. Once the proxy lets the bridge through
// again, its watch from the old resourceVersion gets 410 Gone, and the
// informer lists again. That relist publishes exactly what changed, each
// object once in its current state or as deleted, marked snapshot, and
// nothing about the 21 objects that did not change; a change made after
// it comes from the watch again, not marked snapshot. The bridge logs the
// relist and counts it in bridge_relists_total.
func TestFaultWatchExpiry(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		// The control plane is the whole package's: leave it answering.
		// Registered first, so it runs last.
		t.Cleanup(func() { ensureAPIServer(t) })

		ns := namespace(t, "expiry-"+b.name())
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for i := range 30 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"v": "0"}}
			if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}

		api, err := url.Parse(cp.APIServerURL())
		if err != nil {
			t.Fatal(err)
		}
		px := startCutProxy(t, api.Host)
		env := maps.Clone(b.env(ns))
		env["BRIDGE_CHECKPOINT_INTERVAL"] = "200ms"
		// client-go logs at debug level why a watch closed: that shows
		// the 410 Gone.
		env["BRIDGE_LOG_LEVEL"] = "debug"
		env["KUBECONFIG"] = proxiedKubeconfig(t, px.addr) // after startProc's own, so it wins
		p := startProc(t, procEnv(env), filepath.Join(t.TempDir(), "stdout"))
		metricsAddr := p.httpAddr(t)
		reader := newBusReader(t, b, ns)
		reader.converge(t, time.Minute)

		// A change the watch delivers: the watch the cut breaks has
		// delivered something, so client-go takes its end for a dropped
		// connection and tries to resume it, rather than for a watch
		// that failed at once.
		_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-cut"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reader.converge(t, time.Minute)

		before := map[string]bool{}
		lastRV := "0" // the newest resourceVersion on the bus; the bridge's watch is at it or later
		for _, m := range reader.read(t) {
			before[m.ID] = true
			if rvLess(lastRV, m.ResourceVersion) {
				lastRV = m.ResourceVersion
			}
		}
		relistsBefore := relists(t, metricsAddr)
		if _, got := expiryLogs(p, ns); len(got) != 0 {
			t.Fatalf("the bridge relisted before the cut: %v", got)
		}

		// Take the API server away from the bridge, and change things
		// behind its back.
		px.cut()
		cut := time.Now()
		want := map[string]string{} // name -> action
		for i := range 5 {
			name := fmt.Sprintf("cm-%02d", i)
			times := 1
			if i == 0 {
				times = 3
			}
			for n := range times {
				cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cm.Data["v"] = strconv.Itoa(n + 1)
				if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			want[name] = "updated"
		}
		for i := 5; i < 10; i++ {
			name := fmt.Sprintf("cm-%02d", i)
			if err := cms.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want[name] = "deleted"
		}
		for i := 30; i < 35; i++ {
			name := fmt.Sprintf("cm-%02d", i)
			if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			want[name] = "added"
		}

		// Forget the history, in etcd and in the API server's watch cache.
		compacted := etcdCompact(t)
		rctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		err = cp.RestartAPIServer(rctx)
		cancel()
		if err != nil {
			t.Fatalf("restart kube-apiserver: %v\n%s", err, cp.LogTails())
		}
		// The bridge's position is gone: a watch from it gets 410 Gone.
		waitWatchGone(t, ns, lastRV)

		px.resume(t)
		resumed := time.Now()
		cutFor := resumed.Sub(cut)
		converged := convergeWhileRunning(t, reader, p, expiryConvergeTimeout)

		// A change after the relist comes from the watch. Once it is on
		// the bus and nothing waits in the bridge, everything the relist
		// found has been published: the informer hands changes over in
		// order, the relist's before this one.
		sentinel, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-relist"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		convergeWhileRunning(t, reader, p, time.Minute)
		poll.Until(t, time.Minute, func() (bool, string) {
			s, ok := scrape(metricsAddr)
			return ok && s.Sum("bridge_pending_deltas") == 0, fmt.Sprintf("bridge_pending_deltas %v", s.Sum("bridge_pending_deltas"))
		})

		msgs := reader.read(t)
		v := oracle(t, ns, msgs)
		if v.mismatch != "" {
			t.Errorf("the view differs from the LIST: %s", v.mismatch)
		}
		if v.duplicates != 0 {
			t.Errorf("%d duplicate events", v.duplicates)
		}
		if len(v.backwards) != 0 {
			t.Errorf("resourceVersions went backwards: %s", strings.Join(v.backwards, "; "))
		}
		var found []*wire.Message // what the relist published
		sentinels := 0
		for _, m := range msgs {
			switch {
			case before[m.ID]:
			case m.Name == sentinel.Name:
				sentinels++
				if m.Action != "added" || m.Snapshot || m.ResourceVersion != sentinel.ResourceVersion {
					t.Errorf("the change after the relist: %s, want added at %s from the watch", describeMsg(m), sentinel.ResourceVersion)
				}
			default:
				found = append(found, m)
			}
		}
		if sentinels != 1 {
			t.Errorf("%d events for the change after the relist, want 1", sentinels)
		}
		missing := maps.Clone(want)
		snapshots := 0
		for _, m := range found {
			if m.Snapshot {
				snapshots++
			}
			action, changed := want[m.Name]
			switch {
			case !changed:
				t.Errorf("%s: the object did not change while the bridge was cut off", describeMsg(m))
			case m.Action != action:
				t.Errorf("%s: want %s", describeMsg(m), action)
			case !m.Snapshot:
				t.Errorf("%s: not marked snapshot, but only a relist could find it", describeMsg(m))
			}
			delete(missing, m.Name)
		}
		for name, action := range missing {
			t.Errorf("%s: no %s event after the relist", name, action)
		}
		if len(found) != len(want) {
			t.Errorf("%d events after the relist, want exactly %d (5 updated, 5 deleted, 5 added)", len(found), len(want))
		}

		// The watch from the old position got 410 Gone, and the relist
		// followed it, at a resourceVersion past the compaction.
		gone, logged := expiryLogs(p, ns)
		if gone < 0 {
			t.Errorf("the bridge did not log a watch closed with 410 Gone (too old resource version)")
		}
		if len(logged) == 0 {
			t.Errorf("the bridge did not log a relist of configmaps in %s", ns)
		}
		var relistRVs []string
		for _, l := range logged {
			relistRVs = append(relistRVs, l.rv)
			if gone >= 0 && l.line < gone {
				t.Errorf("a relist at resourceVersion %s was logged before the watch got 410 Gone", l.rv)
			}
			if rvLess(l.rv, strconv.FormatInt(compacted, 10)) {
				t.Errorf("a relist at resourceVersion %s, before the compaction at %d", l.rv, compacted)
			}
		}
		relistsAfter := relists(t, metricsAddr)
		if relistsAfter <= relistsBefore {
			t.Errorf("bridge_relists_total went from %v to %v, want it to grow", relistsBefore, relistsAfter)
		}
		if code := p.terminate(t); code != 0 {
			t.Errorf("exit code %d after SIGTERM", code)
		}
		t.Logf("%s: cut off for %s (etcd compacted at revision %d, the bridge's watch was at %s or later); "+
			"the view equalled the LIST %s after the resume; %d events from the relist (%d marked snapshot), %d duplicates; "+
			"relists logged at resourceVersion %v; bridge_relists_total %v -> %v; %d connections through the proxy",
			b.name(), cutFor.Round(time.Millisecond), compacted, lastRV, converged.Round(time.Millisecond),
			len(found), snapshots, v.duplicates, relistRVs, relistsBefore, relistsAfter, px.accepted.Load())
	})
}

// convergeWhileRunning is r.converge, failing at once if the bridge
// process exits meanwhile. It returns how long the view took to equal the
// LIST.
func convergeWhileRunning(t *testing.T, r *busReader, p *proc, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	r.v = verdict{mismatch: "not read yet"}
	poll.Until(t, timeout, func() (bool, string) {
		select {
		case <-p.done:
			_ = p.cmd.Wait()
			t.Fatalf("the bridge exited (%v) before the view equalled the LIST", p.cmd.ProcessState)
		default:
		}
		if time.Since(r.last) >= 250*time.Millisecond {
			r.last = time.Now()
			r.v = r.s.judge(t, r.read(t))
		}
		return r.v.mismatch == "", r.v.mismatch
	})
	return time.Since(began)
}

// etcdCompact compacts etcd's history up to its current revision, through
// etcd's JSON gateway, and returns that revision.
func etcdCompact(t *testing.T) int64 {
	t.Helper()
	call := func(path string, req any) map[string]any {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(cp.EtcdURL()+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("etcd %s: %v", path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("etcd %s: status %d, %v", path, resp.StatusCode, err)
		}
		return out
	}
	// Every answer carries the current revision in its header; a range
	// over the key "\x00" is a cheap question to ask.
	header, _ := call("/v3/kv/range", map[string]any{"key": "AA=="})["header"].(map[string]any)
	rev, err := strconv.ParseInt(fmt.Sprint(header["revision"]), 10, 64)
	if err != nil {
		t.Fatalf("etcd revision in %v: %v", header, err)
	}
	call("/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true})
	return rev
}

// waitWatchGone waits until a watch of the ConfigMaps of ns from
// resourceVersion rv is refused with 410 Gone, as it is once the API
// server keeps no history that old. A restarted API server may first
// answer that it is not ready; any other answer fails the test.
func waitWatchGone(t *testing.T, ns, rv string) {
	t.Helper()
	poll.Until(t, time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		w, err := kube(t).CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err == nil {
			defer w.Stop()
			select {
			case ev, ok := <-w.ResultChan():
				switch {
				case !ok:
					err = fmt.Errorf("the watch ended without an event")
				case ev.Type == watch.Error:
					err = apierrors.FromObject(ev.Object)
				default:
					t.Fatalf("a watch from resourceVersion %s still works (first event %s); the history was not forgotten", rv, ev.Type)
				}
			case <-ctx.Done():
				t.Fatalf("a watch from resourceVersion %s still works (no error in 10s); the history was not forgotten", rv)
			}
		}
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			return true, ""
		case apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || serverAway(err):
			return false, "watch from resourceVersion " + rv + ": " + err.Error()
		default:
			t.Fatalf("watch from resourceVersion %s: %v, want 410 Gone", rv, err)
			return false, ""
		}
	})
}

// relists is the bridge's bridge_relists_total for configmaps.
func relists(t *testing.T, addr string) float64 {
	t.Helper()
	s, ok := scrape(addr)
	if !ok {
		t.Fatalf("no /metrics at %s", addr)
	}
	return s.Sum("bridge_relists_total")
}

// loggedRelist is a relist the bridge logged: the resourceVersion of its
// list, and the number of the log line.
type loggedRelist struct {
	rv   string
	line int
}

// expiryLogs reads the bridge's log: gone is the number of the first line
// where client-go says a watch closed because its resourceVersion was too
// old (410 Gone), or -1; relists are the relists of configmaps in ns.
func expiryLogs(p *proc, ns string) (gone int, relists []loggedRelist) {
	gone = -1
	i := 0
	for line := range strings.Lines(p.logText()) {
		i++
		var rec struct{ Msg, Component, Err, Resource, Namespace, ResourceVersion string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case gone < 0 && rec.Component == "client-go" && strings.Contains(rec.Err, "too old resource version"):
			gone = i
		case strings.HasPrefix(rec.Msg, "relisted") && rec.Resource == "configmaps" && rec.Namespace == ns:
			relists = append(relists, loggedRelist{rv: rec.ResourceVersion, line: i})
		}
	}
	return gone, relists
}
