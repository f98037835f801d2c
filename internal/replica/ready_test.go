package replica

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	consumernats "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/internal/httpserver"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// readyz runs s's /readyz, as cmd/replica serves it, and returns a func
// that reads it: its code and body.
func readyz(t *testing.T, s *Server) func() (int, string) {
	t.Helper()
	ops, err := httpserver.New("127.0.0.1:0", prometheus.NewRegistry(), s.Ready, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ops.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return func() (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get("http://" + ops.Addr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// natsDiscovery makes the replica read its discovery from srv's stream.
func natsDiscovery(t *testing.T, srv *natstest.Server) func(*Config) {
	return func(cfg *Config) {
		dl, err := consumernats.NewDiscoveryLog(srv.JetStream(t), consumernats.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Discovery = dl
	}
}

// The replica is ready only once it has read the discovery on the bus:
// not while the bus holds none, and, once it does, not before the
// documents are held, whatever the order they are read in.
func TestReadyOnceDiscoveryRead(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})

	// No bridge has published yet: no stream, no document.
	early := bareServer(t, 0)
	natsDiscovery(t, srv)(&early.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = early.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	earlyReady := readyz(t, early)
	if code, body := earlyReady(); code != http.StatusServiceUnavailable || !strings.Contains(body, "discovery") {
		t.Fatalf("/readyz before any discovery document on the bus: %d %q, want 503 naming the discovery", code, body)
	}

	// A bridge publishes its cluster's discovery.
	vars := srv.Env()
	vars["BRIDGE_NATS_LAYOUT"] = string(natssink.LayoutState)
	bus := bustest.NATSSink(t, vars)
	if err := bus.WriteDiscovery(t.Context(), cmDiscovery("one")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		code, body := earlyReady()
		return code == http.StatusOK, "/readyz after a discovery document: " + body
	})
	if got := early.disc.clusters(); len(got) != 1 || got[0] != "one" {
		t.Errorf("ready, holding the discovery of clusters %q, want [one]", got)
	}

	// A replica that starts with the document on the bus is ready only
	// once it holds it.
	_, late, _ := testServerConfig(t, srv, natsDiscovery(t, srv))
	lateReady := readyz(t, late)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		code, body := lateReady()
		if code != http.StatusOK {
			return false, "/readyz with a discovery document on the bus: " + body
		}
		if got := late.disc.clusters(); len(got) != 1 || got[0] != "one" {
			t.Fatalf("ready, holding the discovery of clusters %q, want [one]", got)
		}
		return true, ""
	})
}
