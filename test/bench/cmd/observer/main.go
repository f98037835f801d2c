// Command observer is the consumer in the latency benchmarks: one process
// that sees each ConfigMap change twice, through a bare client-go watch on
// the API server (the baseline) and through a NATS subscription to the
// bridge's stream, and times both arrivals the same way. With -kafka, the
// bus is the bridge's Kafka topic instead, followed by a client-go
// informer through the consumer package (consumer/kafka): its events are
// the "bus" lines, and the records its Log hands over are "record" lines.
//
// The watch decodes objects as the bridge's informers do (unstructured
// JSON). The subscription is an ordered JetStream consumer, delivering
// only messages stored after it starts. A bare client-go informer, on a
// connection of its own, times the changes a third way, to tell what
// client-go's informer machinery, which the bridge is built on, costs on
// top of a watch.
//
// For every added or modified ConfigMap the watch reports, and every
// message the subscription receives, it writes one line to standard
// output, timed on arrival by the wall clock, which every process of the
// machine shares:
//
//	watch <name> <resourceVersion> <arrival, Unix ns>
//	informer <name> <resourceVersion> <arrival, Unix ns>
//	bus <name> <resourceVersion> <arrival, Unix ns> <the event's time, Unix ns> <stored, Unix ns>
//	bus <name> <resourceVersion> <arrival, Unix ns>                                (-kafka)
//	record <name> <resourceVersion> <arrival, Unix ns> <the event's time, Unix ns> (-kafka)
//
// The event's time is when the bridge's informer handed it the change;
// stored is when the NATS server stored the message.
//
// Lines are buffered and written every 100 ms, so that reporting costs
// the observers nothing. It writes "ready" to standard error once both are
// listening, and stops on SIGTERM or when standard input closes.
//
//	KUBECONFIG=... observer -namespace latency -nats nats://127.0.0.1:4222 \
//	    -stream KUBE -subject 'kube.bench.core.configmaps.latency.>'
//	KUBECONFIG=... observer -namespace latency -kafka 127.0.0.1:9092 -cluster bench
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type options struct {
	namespace, natsURL, stream, subject string
	// kafka, when set, is the brokers (comma-separated) of the bridge's
	// Kafka topic, followed by an informer instead of a NATS subscription;
	// cluster is the bridge's cluster name, which that informer needs.
	kafka, cluster string
}

func main() {
	var o options
	flag.StringVar(&o.namespace, "namespace", "default", "namespace whose ConfigMaps to watch")
	flag.StringVar(&o.natsURL, "nats", nats.DefaultURL, "NATS server URL")
	flag.StringVar(&o.stream, "stream", "KUBE", "stream the bridge publishes to")
	flag.StringVar(&o.subject, "subject", "kube.>", "subjects of the namespace's ConfigMaps")
	flag.StringVar(&o.kafka, "kafka", "", "Kafka brokers, comma-separated: follow the bridge's topic with an informer instead of NATS")
	flag.StringVar(&o.cluster, "cluster", "", "the bridge's cluster name (with -kafka)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		// The benchmark holds standard input open while it runs.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "observer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	out := &lines{w: stdout}
	done := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		out.flushEvery(100*time.Millisecond, done)
	}()
	defer func() {
		close(done)
		<-flushed
	}()

	var stopBus func()
	if o.kafka != "" {
		s, err := informKafka(ctx, o, out)
		if err != nil {
			return err
		}
		stopBus = s
	} else {
		nc, err := nats.Connect(o.natsURL, nats.Name("observer"))
		if err != nil {
			return err
		}
		defer nc.Close()
		s, err := subscribe(ctx, nc, o, out)
		if err != nil {
			return err
		}
		stopBus = s
	}
	defer stopBus()

	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := inform(ctx, rc, o.namespace, out); err != nil {
		return err
	}
	res := dyn.Resource(configMaps).Namespace(o.namespace)
	return watchBare(ctx, res, out)
}

// subscribe times every message of the bridge's stream stored from now on.
func subscribe(ctx context.Context, nc *nats.Conn, o options, out *lines) (stop func(), err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, o.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{o.subject},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		var ev struct {
			Name            string    `json:"name"`
			ResourceVersion string    `json:"resourceversion"`
			Time            time.Time `json:"time"`
		}
		if err := json.Unmarshal(m.Data(), &ev); err != nil || ev.Name == "" || ev.ResourceVersion == "" {
			fmt.Fprintf(os.Stderr, "observer: unreadable message on %s: %v\n", m.Subject(), err)
			return
		}
		var stored time.Time
		if md, err := m.Metadata(); err == nil {
			stored = md.Timestamp
		}
		out.add("bus", ev.Name, ev.ResourceVersion, now, ev.Time, stored)
	})
	if err != nil {
		return nil, err
	}
	return cc.Stop, nil
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// inform runs a bare client-go informer, on a connection of its own, on
// the ConfigMaps of ns, and returns once it has synced.
func inform(ctx context.Context, rc *rest.Config, ns string, out *lines) error {
	rc = rest.CopyConfig(rc)
	// client-go shares one connection among clients of equal
	// configurations, except those with a dial function of their own.
	rc.Dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	inf := f.ForResource(configMaps).Informer()
	seen := func(obj any) {
		now := time.Now()
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out.add("informer", u.GetName(), u.GetResourceVersion(), now)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for _, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return errors.New("informer not synced")
		}
	}
	return nil
}

// watchBare lists, then watches from the list's resourceVersion until ctx
// ends, resuming a watch the server ends.
func watchBare(ctx context.Context, res dynamic.ResourceInterface, out *lines) error {
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	rv := list.GetResourceVersion()
	w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "ready")
	for {
		for ev := range w.ResultChan() {
			now := time.Now()
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			rv = u.GetResourceVersion()
			out.add("watch", u.GetName(), rv, now)
		}
		for {
			if ctx.Err() != nil {
				return nil
			}
			w, err = res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err == nil {
				break
			}
			if errors.Is(err, context.Canceled) {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// lines buffers the output; flush writes it outside the lock, so that a
// slow reader never holds up the observers.
type lines struct {
	w io.Writer

	mu  sync.Mutex
	buf []byte
}

func (l *lines) add(source, name, rv string, times ...time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, source...)
	l.buf = append(l.buf, ' ')
	l.buf = append(l.buf, name...)
	l.buf = append(l.buf, ' ')
	l.buf = append(l.buf, rv...)
	for _, t := range times {
		l.buf = append(l.buf, ' ')
		l.buf = strconv.AppendInt(l.buf, t.UnixNano(), 10)
	}
	l.buf = append(l.buf, '\n')
}

// flush writes what was added since the last flush; only one goroutine
// may call it at a time.
func (l *lines) flush(spare []byte) []byte {
	l.mu.Lock()
	b := l.buf
	l.buf = spare[:0]
	l.mu.Unlock()
	_, _ = l.w.Write(b)
	return b
}

// flushEvery flushes every d until done is closed, then once more.
func (l *lines) flushEvery(d time.Duration, done <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	var spare []byte
	for {
		select {
		case <-t.C:
			spare = l.flush(spare)
		case <-done:
			l.flush(nil)
			return
		}
	}
}
