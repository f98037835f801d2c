// Package httpserver serves the bridge's operational endpoints:
//
//   - /healthz answers 200 while the process runs;
//   - /readyz answers 200 when the bridge is ready, 503 with the reason
//     otherwise;
//   - /metrics serves the Prometheus metrics of one registry;
//   - /debug/pprof/ serves Go's runtime profiles, only when asked for.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// shutdownTimeout bounds how long Run waits for requests in flight when
// its context ends; probes and scrapes are short.
const shutdownTimeout = 5 * time.Second

// Server is the operational HTTP server.
type Server struct {
	mux *http.ServeMux
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// New listens on addr at once, so that a taken port fails start-up.
// ready reports readiness: nil means ready.
func New(addr string, reg *prometheus.Registry, ready func() error, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpserver: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return &Server{
		mux: mux,
		ln:  ln,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		log: log,
	}, nil
}

// ServeProfiles adds Go's runtime profiles under /debug/pprof/ (heap,
// CPU, goroutines and the rest). They reveal the program's internals, so
// they are served only when asked for. Call it before Run.
func (s *Server) ServeProfiles() {
	s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		defer utilruntime.HandleCrash()
		errc <- s.srv.Serve(s.ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("httpserver: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("httpserver: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("httpserver: %w", err)
	}
	return nil
}
