package httpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func serve(t *testing.T, ready func() error, profiles bool) string {
	t.Helper()
	s, err := New("127.0.0.1:0", prometheus.NewRegistry(), ready, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if profiles {
		s.ServeProfiles()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + s.Addr()
}

func TestEndpoints(t *testing.T) {
	var notReady atomic.Pointer[error]
	base := serve(t, func() error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}, false)
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz while ready: %d", code)
	}
	down := errors.New("sink down")
	notReady.Store(&down)
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "sink down") {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	if code, _ := get(t, base+"/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/heap without profiles: %d, want 404", code)
	}
}

func TestProfiles(t *testing.T) {
	base := serve(t, func() error { return nil }, true)
	if code, _ := get(t, base+"/debug/pprof/heap?gc=1"); code != http.StatusOK {
		t.Errorf("/debug/pprof/heap: %d", code)
	}
	if code, body := get(t, base+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d", code)
	}
}
