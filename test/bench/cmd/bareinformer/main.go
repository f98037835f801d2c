// Command bareinformer is the baseline of the memory, restart and
// watch-everything benchmarks: plain client-go dynamic shared informers
// that list and watch in all namespaces and cache the objects whole,
// managedFields included, with no transform and no event handler.
//
// By default it caches one resource (-group, -version, -resource). With
// -select it caches every resource a BRIDGE_RESOURCES value selects, such
// as "*", chosen exactly as the bridge chooses them: the bridge's own
// configuration parses the value with its default exclusions, and its
// source.Set selects from discovery (preferred versions, list and watch
// verbs, no secrets through a pattern). One informer factory holds one
// informer per resource.
//
// Its client has the bridge's default rate limits (BRIDGE_KUBE_QPS and
// BRIDGE_KUBE_BURST), and otherwise client-go's defaults. Its transport
// counts the answers 429 Too Many Requests it gets, as
// bareinformer_api_throttled_total.
//
// It serves what the bridge serves for measuring it: /metrics with the
// Prometheus Go and process collectors, and Go's profiles under
// /debug/pprof/. It logs JSON lines to standard error, like the bridge:
// "serving" with the address once it listens, and "synced" once every
// informer's cache holds the initial list, with the objects cached, the
// resources and the answers 429 so far. SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/source"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address of /metrics and /debug/pprof/")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	group := flag.String("group", "", "API group of the resource; empty for the core group")
	version := flag.String("version", "v1", "API version of the resource")
	resource := flag.String("resource", "configmaps", "resource to cache, in all namespaces")
	sel := flag.String("select", "", "a BRIDGE_RESOURCES value, such as *: cache every resource it selects with the bridge's default exclusions, instead of -resource")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	gvr := schema.GroupVersionResource{Group: *group, Version: *version, Resource: *resource}
	if err := run(*addr, *kubeconfig, gvr, *sel, log); err != nil {
		log.Error("bareinformer failed", "err", err)
		os.Exit(1)
	}
}

func run(addr, kubeconfig string, gvr schema.GroupVersionResource, sel string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()

	// The bridge's configuration, for its defaults: client rate limits,
	// and the exclusions of a pattern.
	resources := sel
	if resources == "" {
		resources = source.All
	}
	cfg, err := config.Load([]string{"BRIDGE_RESOURCES=" + resources})
	if err != nil {
		return fmt.Errorf("-select: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "bareinformer"
	rc.QPS, rc.Burst = cfg.KubeQPS, cfg.KubeBurst
	throttled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bareinformer_api_throttled_total",
		Help: "Answers 429 Too Many Requests, each retry's included.",
	})
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countThrottled{rt, throttled} })
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(throttled), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	log.Info("serving /metrics and /debug/pprof/", "addr", ln.Addr().String())

	gvrs := []schema.GroupVersionResource{gvr}
	if sel != "" {
		if gvrs, err = selected(ctx, client, rc, cfg.Selection()); err != nil {
			return err
		}
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
	informers := make([]cache.SharedIndexInformer, len(gvrs))
	for i, r := range gvrs {
		informers[i] = factory.ForResource(r).Informer()
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for _, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return nil // stopped before the initial lists were in
		}
	}
	took := time.Since(start)
	objects := 0
	names := make([]string, len(gvrs))
	for i, inf := range informers {
		objects += len(inf.GetStore().ListKeys())
		names[i] = gvrs[i].GroupResource().String()
	}
	if sel == "" {
		log.Info("synced", "resource", gvr.String(), "objects", objects, "took", took.String())
	} else {
		log.Info("synced", "objects", objects, "resources", names, "throttled", counted(throttled), "took", took.String())
	}

	<-ctx.Done()
	return nil
}

// selected are the resources sel selects, as the bridge selects them.
func selected(ctx context.Context, client dynamic.Interface, rc *rest.Config, sel source.Selection) ([]schema.GroupVersionResource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	set := source.NewSet(client, dc, source.SetOptions{Selection: sel}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := set.Select(ctx); err != nil {
		return nil, fmt.Errorf("select the resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, r := range set.Resources() {
		out = append(out, r.GroupVersionResource)
	}
	return out, nil
}

// countThrottled counts the answers 429 Too Many Requests.
type countThrottled struct {
	next http.RoundTripper
	n    prometheus.Counter
}

func (c countThrottled) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.n.Inc()
	}
	return resp, err
}

// counted is a counter's value.
func counted(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// handler serves /metrics and the profiles, as the bridge does with
// BRIDGE_PPROF=true.
func handler(throttled prometheus.Counter) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), throttled)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
