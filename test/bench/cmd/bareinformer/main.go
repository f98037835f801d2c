// Command bareinformer is the baseline of the memory and restart
// benchmarks: a plain client-go dynamic shared informer that lists and
// watches one resource in all namespaces and caches the objects whole,
// managedFields included, with no transform and no event handler.
//
// It serves what the bridge serves for measuring it: /metrics with the
// Prometheus Go and process collectors, and Go's profiles under
// /debug/pprof/. It logs JSON lines to standard error, like the bridge:
// "serving" with the address once it listens, and "synced" once the
// informer's cache holds the initial list. SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address of /metrics and /debug/pprof/")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	group := flag.String("group", "", "API group of the resource; empty for the core group")
	version := flag.String("version", "v1", "API version of the resource")
	resource := flag.String("resource", "configmaps", "resource to cache, in all namespaces")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	gvr := schema.GroupVersionResource{Group: *group, Version: *version, Resource: *resource}
	if err := run(*addr, *kubeconfig, gvr, log); err != nil {
		log.Error("bareinformer failed", "err", err)
		os.Exit(1)
	}
}

func run(addr, kubeconfig string, gvr schema.GroupVersionResource, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()

	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// The bridge's client settings, so that both list alike.
	rc.UserAgent = "bareinformer"
	rc.QPS, rc.Burst = 50, 100
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	log.Info("serving /metrics and /debug/pprof/", "addr", ln.Addr().String())

	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
	informer := factory.ForResource(gvr).Informer()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // stopped before the initial list was in
	}
	log.Info("synced", "resource", gvr.String(), "objects", len(informer.GetStore().ListKeys()),
		"took", time.Since(start).String())

	<-ctx.Done()
	return nil
}

// handler serves /metrics and the profiles, as the bridge does with
// BRIDGE_PPROF=true.
func handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
