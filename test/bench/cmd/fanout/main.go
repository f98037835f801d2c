// Command fanout is the consumer side of the fan-out benchmark: N client-go
// shared informers on one resource in all namespaces, started at once in
// one process, each with its own connection, as N separate consumers would
// have.
//
// With -from apiserver each informer lists and watches the API server
// (a dynamic informer with its own client and TCP connection). With -from
// nats each reads the bridge's NATS JetStream stream through
// consumer/nats (its own NATS connection), and never contacts the API
// server. Both drop managedFields with a transform, so that fifty caches
// of the same objects fit in memory; the objects still arrive whole.
//
// It logs JSON lines to standard error: "synced" once every informer's
// cache holds its initial list, with each informer's time from the
// process's start until it synced (tookMs) and the smallest and largest
// number of objects an informer holds. SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubebus/bridge/consumer"
	consumernats "github.com/kubebus/bridge/consumer/nats"
)

// options say where the informers read from.
type options struct {
	from       string // "apiserver" or "nats"
	n          int
	gvr        schema.GroupVersionResource
	kubeconfig string
	natsURL    string
	stream     string
	cluster    string
}

func main() {
	start := time.Now()
	var o options
	flag.StringVar(&o.from, "from", "apiserver", `where the informers read: "apiserver" or "nats"`)
	flag.IntVar(&o.n, "n", 1, "number of informers")
	flag.StringVar(&o.gvr.Resource, "resource", "configmaps", "resource, in all namespaces")
	flag.StringVar(&o.gvr.Group, "group", "", "API group of the resource; empty for the core group")
	flag.StringVar(&o.gvr.Version, "version", "v1", "API version of the resource (-from apiserver)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (-from apiserver)")
	flag.StringVar(&o.natsURL, "nats-url", nats.DefaultURL, "NATS server (-from nats)")
	flag.StringVar(&o.stream, "stream", "KUBE", "the bridge's stream (-from nats)")
	flag.StringVar(&o.cluster, "cluster", "", "the bridge's BRIDGE_CLUSTER_NAME (-from nats)")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, start, o, log); err != nil {
		log.Error("fanout failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, start time.Time, o options, log *slog.Logger) error {
	if o.n < 1 {
		return fmt.Errorf("-n %d: want at least 1", o.n)
	}
	var newInformer func(i int) (cache.SharedIndexInformer, func(), error)
	switch o.from {
	case "apiserver":
		newInformer = func(int) (cache.SharedIndexInformer, func(), error) { return direct(o) }
	case "nats":
		newInformer = func(i int) (cache.SharedIndexInformer, func(), error) { return fromNATS(o, i, log) }
	default:
		return fmt.Errorf("-from %q: want apiserver or nats", o.from)
	}

	informers := make([]cache.SharedIndexInformer, o.n)
	for i := range informers {
		inf, closeFn, err := newInformer(i)
		if err != nil {
			return fmt.Errorf("informer %d: %w", i, err)
		}
		defer closeFn()
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return err
		}
		informers[i] = inf
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// took[i] is informer i's time from the process's start until it
	// synced; written before syncs.Done, read after syncs.Wait.
	took := make([]float64, o.n)
	var syncs sync.WaitGroup
	for i, inf := range informers {
		wg.Go(func() { inf.RunWithContext(runCtx) })
		syncs.Go(func() {
			if cache.WaitForCacheSync(runCtx.Done(), inf.HasSynced) {
				took[i] = float64(time.Since(start).Microseconds()) / 1000
			}
		})
	}
	syncs.Wait()
	if ctx.Err() != nil {
		return nil // stopped before every informer synced
	}
	lo, hi := len(informers[0].GetStore().ListKeys()), 0
	for _, inf := range informers {
		n := len(inf.GetStore().ListKeys())
		lo, hi = min(lo, n), max(hi, n)
	}
	log.Info("synced", "from", o.from, "informers", o.n, "objectsMin", lo, "objectsMax", hi, "tookMs", took)
	<-ctx.Done()
	return nil
}

// direct is a dynamic informer on the API server, with a client of its
// own: a custom dialer keeps client-go from sharing one transport (and so
// one HTTP/2 connection) between the informers.
func direct(o options) (cache.SharedIndexInformer, func(), error) {
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// The bridge's client settings, so that both list alike.
	rc.UserAgent = "fanout"
	rc.QPS, rc.Burst = 50, 100
	rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(client, o.gvr, "", 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	return inf, func() {}, nil
}

// fromNATS is an informer on the bridge's stream, with a NATS connection
// of its own.
func fromNATS(o options, i int, log *slog.Logger) (cache.SharedIndexInformer, func(), error) {
	nc, err := nats.Connect(o.natsURL, nats.Name(fmt.Sprintf("fanout-%d", i)), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	lw, err := consumernats.NewListerWatcher(js, consumernats.Config{Stream: o.stream}, consumer.Options{
		Cluster:  o.cluster,
		Resource: o.gvr.GroupResource(),
		Name:     fmt.Sprintf("fanout-%d", i),
		Logger:   log.With("informer", i),
	})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return inf, func() {
		_ = lw.Close()
		nc.Close()
	}, nil
}

// dropManagedFields is the informers' transform. It is idempotent, as
// client-go asks.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		return u, nil
	}
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return obj, nil
	}
	return nil, errors.New("fanout: transform: not an unstructured object")
}
