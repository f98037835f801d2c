package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/metricstest"
	"github.com/kubebus/bridge/test/poll"
)

// httpAddr is the address the bridge process serves /metrics on, from its
// log.
func (p *proc) httpAddr(t *testing.T) string {
	t.Helper()
	var addr string
	poll.Until(t, 30*time.Second, func() (bool, string) {
		for line := range strings.Lines(p.logText()) {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "serving /metrics") {
				addr = rec.Addr
				return true, ""
			}
		}
		return false, "no address logged"
	})
	return addr
}

// scrape reads the bridge's metrics; ok is false when it does not answer.
func scrape(addr string) (samples metricstest.Samples, ok bool) {
	samples, err := metricstest.Scrape(addr)
	return samples, err == nil
}

// readyz returns the status of /readyz and its body.
func readyz(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// Two bridges with leader election publish to NATS; only the leader
// publishes. SIGKILL the leader: the standby takes over within the lease
// duration, and the oracle finds nothing lost.
func TestLeaderFailover(t *testing.T) {
	b := newNATSBus(t, busOptions{})
	ns := namespace(t, "ha")
	const lease = 4 * time.Second
	base := map[string]string{
		"BRIDGE_LEADER_ELECTION":                "true",
		"BRIDGE_LEADER_ELECTION_NAMESPACE":      ns,
		"BRIDGE_LEADER_ELECTION_NAME":           "bridge",
		"BRIDGE_LEADER_ELECTION_LEASE_DURATION": lease.String(),
		"BRIDGE_LEADER_ELECTION_RENEW_DEADLINE": "3s",
		"BRIDGE_LEADER_ELECTION_RETRY_PERIOD":   "500ms",
		"BRIDGE_CHECKPOINT_INTERVAL":            "200ms",
	}
	maps.Copy(base, b.env(ns))
	start := func(id, until string) *proc {
		env := maps.Clone(base)
		env["BRIDGE_LEADER_ELECTION_IDENTITY"] = id
		var environ []string
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		return startProcUntil(t, environ, filepath.Join(t.TempDir(), id+".out"), until)
	}
	// The first becomes leader and ready; the second stands by, and a
	// standby is ready too.
	first := start("first", "ready")
	second := start("second", "standing by")
	firstAddr, secondAddr := first.httpAddr(t), second.httpAddr(t)
	if code, body := readyz(secondAddr); code != http.StatusOK {
		t.Errorf("standby /readyz: %d %s, want 200", code, body)
	}

	ctx, stopChurn := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { churn(ctx, t, ns, 30, 7) })

	poll.Until(t, 30*time.Second, func() (bool, string) {
		s, _ := scrape(firstAddr)
		return s.Sum("bridge_deltas_published_total") >= 50, fmt.Sprintf("leader published %v", s.Sum("bridge_deltas_published_total"))
	})
	s1, _ := scrape(firstAddr)
	s2, _ := scrape(secondAddr)
	if s1.Sum("bridge_leader") != 1 || s2.Sum("bridge_leader") != 0 {
		t.Fatalf("bridge_leader: first %v, second %v; want 1 and 0", s1.Sum("bridge_leader"), s2.Sum("bridge_leader"))
	}
	if n := s2.Sum("bridge_deltas_published_total"); n != 0 {
		t.Errorf("the standby published %v deltas", n)
	}

	first.kill(t)
	killed := time.Now()
	var took time.Duration
	poll.Until(t, 3*lease, func() (bool, string) {
		s, _ := scrape(secondAddr)
		if s.Sum("bridge_leader") == 1 {
			took = time.Since(killed)
			return true, ""
		}
		return false, "the standby has not taken over"
	})
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := readyz(secondAddr)
		return code == http.StatusOK, fmt.Sprintf("new leader /readyz: %d %s", code, body)
	})
	stopChurn()
	wg.Wait()

	var v verdict
	poll.Until(t, 60*time.Second, func() (bool, string) {
		v = oracle(t, ns, b.read(t, ns))
		return v.mismatch == "", v.mismatch
	})
	if len(v.backwards) != 0 || v.duplicates != 0 {
		t.Errorf("verdict %+v: want nothing backwards and no duplicates (JetStream drops repeats)", v)
	}
	if code := second.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	t.Logf("standby took over %s after the leader was killed (lease %s); %d events, %d duplicates",
		took.Round(10*time.Millisecond), lease, v.events, v.duplicates)
}

// /metrics counts real deltas, and /readyz turns not-ready while the sink
// is down, then ready again.
func TestMetricsAndReadiness(t *testing.T) {
	b := newNATSBus(t, busOptions{})
	ns := namespace(t, "metrics")
	var environ []string
	for k, v := range b.env(ns) {
		environ = append(environ, k+"="+v)
	}
	p := startProc(t, environ, filepath.Join(t.TempDir(), "out"))
	addr := p.httpAddr(t)
	if code, body := readyz(addr); code != http.StatusOK {
		t.Fatalf("/readyz %d %s, want 200", code, body)
	}
	before, _ := scrape(addr)
	if before.Sum("bridge_informer_synced") != 1 || before.Sum("bridge_sink_up") != 1 {
		t.Errorf("synced=%v sink_up=%v, want 1 and 1", before.Sum("bridge_informer_synced"), before.Sum("bridge_sink_up"))
	}

	ctx, stopChurn := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var made int
	wg.Go(func() { made = churn(ctx, t, ns, 10, 3) })
	poll.Until(t, 30*time.Second, func() (bool, string) {
		s, _ := scrape(addr)
		return s.Sum("bridge_deltas_published_total") >= 20, fmt.Sprintf("published %v", s.Sum("bridge_deltas_published_total"))
	})

	b.stop(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := readyz(addr)
		return code == http.StatusServiceUnavailable, fmt.Sprintf("/readyz %d %s with the sink down", code, body)
	})
	down, _ := scrape(addr)
	b.start(t)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		code, body := readyz(addr)
		return code == http.StatusOK, fmt.Sprintf("/readyz %d %s after the sink came back", code, body)
	})
	stopChurn()
	wg.Wait()
	poll.Until(t, 60*time.Second, func() (bool, string) {
		v := oracle(t, ns, b.read(t, ns))
		return v.mismatch == "", v.mismatch
	})
	// The stream may show the last batch before its publish returned and
	// was counted: the counters catch up.
	var (
		after               metricstest.Samples
		observed, published float64
	)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		after, _ = scrape(addr)
		observed, published = after.Sum("bridge_deltas_observed_total"), after.Sum("bridge_deltas_published_total")
		return observed >= float64(made) && published >= float64(made),
			fmt.Sprintf("observed %v, published %v, want at least the %d changes made", observed, published, made)
	})
	if down.Sum("bridge_sink_up") != 0 {
		t.Errorf("bridge_sink_up %v while the sink was down, want 0", down.Sum("bridge_sink_up"))
	}
	if after.Sum("bridge_publish_duration_seconds") <= 0 {
		t.Errorf("publish duration count %v, want some", after.Sum("bridge_publish_duration_seconds"))
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		s, _ := scrape(addr)
		v := s.Sum("bridge_checkpoint_last_flush_timestamp_seconds")
		return v > float64(time.Now().Add(-time.Minute).Unix()), fmt.Sprintf("last checkpoint flush at %v", v)
	})
	if p.terminate(t) != 0 {
		t.Error("bridge did not exit cleanly")
	}
	t.Logf("%d changes; observed %v, published %v, failed %v", made, observed, published, after.Sum("bridge_deltas_failed_total"))
}
