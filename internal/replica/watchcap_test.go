package replica

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// openWatch starts a watch of path as token's user. A watch served (200)
// stays open until stop is called; any other answer is read whole.
func openWatch(t *testing.T, hsURL string, c *http.Client, path, token string) (code int, body string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hsURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return resp.StatusCode, string(b), func() {}
	}
	stop = func() { cancel(); resp.Body.Close() }
	t.Cleanup(stop)
	return resp.StatusCode, "", stop
}

// A user's watches past REPLICA_MAX_WATCHES_PER_USER are refused, 429,
// naming the cap, single-cluster and all-clusters alike, while another
// user is still served; once one of the user's watches ends, the user is
// served again.
func TestWatchCapPerUser(t *testing.T) {
	hs, s, _ := testServerConfig(t, natstest.Start(t, natstest.Options{}), func(c *Config) { c.MaxWatchesPerUser = 2 }, cmDiscovery("one"))
	c := hs.Client()
	const one = "/clusters/one/api/v1/configmaps?watch=true"
	const all = "/clusters/*/api/v1/configmaps?watch=true"

	code, body, stopFirst := openWatch(t, hs.URL, c, one, testToken)
	if code != http.StatusOK {
		t.Fatalf("alice's first watch: %d %s", code, body)
	}
	if code, body, _ = openWatch(t, hs.URL, c, all, testToken); code != http.StatusOK {
		t.Fatalf("alice's second watch, of all clusters: %d %s", code, body)
	}
	for _, path := range []string{one, all} {
		code, body, _ = openWatch(t, hs.URL, c, path, testToken)
		if code != http.StatusTooManyRequests || !strings.Contains(body, "REPLICA_MAX_WATCHES_PER_USER") || !strings.Contains(body, "at most 2") {
			t.Errorf("alice's third watch, %s: %d %s; want 429 naming the cap of 2 and REPLICA_MAX_WATCHES_PER_USER", path, code, body)
		}
	}
	if code, body, _ = openWatch(t, hs.URL, c, one, "reader-token"); code != http.StatusOK {
		t.Errorf("reader's watch while alice is at her cap: %d %s, want 200", code, body)
	}
	if got := counterValue(t, s.m.refused.WithLabelValues("per_user")); got != 2 {
		t.Errorf("kubebus_replica_watches_refused_total{cap=\"per_user\"} = %v, want 2", got)
	}

	stopFirst()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		code, body, _ := openWatch(t, hs.URL, c, one, testToken)
		return code == http.StatusOK, "alice's watch after one of hers ended: " + body
	})
}
