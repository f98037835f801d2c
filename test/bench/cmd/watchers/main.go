// Command watchers is the client side of the replica's watch fan-out
// benchmark: N watches of the ConfigMaps of one namespace, opened at once
// in one process against one API server (the real kube-apiserver, or the
// replica under /clusters/<name>), and a report of when each change
// reached the last of them.
//
// Every watcher has a client-go REST client of its own, and so its own
// TCP connection and TLS session (HTTP/2, as client-go negotiates it), as
// N separate consumers would have. All of them watch from the
// resourceVersion of one LIST (limit=1) made before they start, so that
// none receives the namespace's objects as initial events: only the
// changes made after it.
//
// A change is told by the annotation -marker, whose value is the change's
// number; events without it are counted and otherwise ignored. The raw
// JSON of each event is searched for the marker, and no event is decoded
// further: the benchmark measures the servers, not the decoder.
//
// It logs JSON lines to standard error: "watching" once every watch's
// answer has begun (its headers arrived), "delivered" once a change has
// reached every watcher, with the time it reached the first and the last
// (Unix nanoseconds, the same clock as the benchmark's). A watch that
// ends, or an event it cannot read, is logged as "watch ended" and stops
// the process with status 1: a run with fewer than N watchers measures
// nothing. SIGTERM or SIGINT stops it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// watchTimeout is the timeoutSeconds every watch asks for: longer than
// any run, so that no server ends a watch during one.
const watchTimeout = time.Hour

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the server to watch")
	namespace := flag.String("namespace", "default", "namespace whose ConfigMaps are watched")
	n := flag.Int("n", 1, "number of watchers")
	marker := flag.String("marker", "bench.kubebus.io/change", "annotation whose value numbers a change")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *n, *marker, log); err != nil {
		log.Error("watch ended", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace string, n int, marker string, log *slog.Logger) error {
	if n < 1 {
		return fmt.Errorf("-n %d: want at least 1", n)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "watchers"
	rc.QPS = -1 // each client makes one list or one watch

	first, err := client(rc)
	if err != nil {
		return err
	}
	rv, err := listPosition(ctx, first, namespace)
	if err != nil {
		return err
	}

	t := newTally(n, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, n)
	var opened sync.WaitGroup
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		c, err := client(rc)
		if err != nil {
			return err
		}
		opened.Add(1)
		wg.Go(func() {
			err := watch(ctx, c, namespace, rv, marker, t, opened.Done)
			if ctx.Err() == nil {
				failed <- fmt.Errorf("watcher %d: %w", i, err)
				cancel()
			}
		})
	}
	opened.Wait()
	if ctx.Err() == nil {
		log.Info("watching", "watchers", n, "resourceVersion", rv)
	}
	<-ctx.Done()
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

// client is a REST client of the core group with a connection of its own:
// a dialer of its own keeps client-go from sharing one transport between
// the watchers.
func client(rc *rest.Config) (rest.Interface, error) {
	rc = rest.CopyConfig(rc)
	rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	kc, err := corev1.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return kc.RESTClient(), nil
}

// listPosition is the resourceVersion of a LIST of the namespace's
// ConfigMaps.
func listPosition(ctx context.Context, c rest.Interface, namespace string) (string, error) {
	raw, err := c.Get().Namespace(namespace).Resource("configmaps").Param("limit", "1").
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("list configmaps: %w", err)
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || list.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("list configmaps: no resourceVersion (%v)", err)
	}
	return list.Metadata.ResourceVersion, nil
}

// watch watches the namespace's ConfigMaps from rv, calls opened once the
// answer has begun, and tallies every change it receives, until ctx ends
// or the watch does.
func watch(ctx context.Context, c rest.Interface, namespace, rv, marker string, t *tally, opened func()) error {
	once := sync.OnceFunc(opened)
	defer once()
	body, err := c.Get().Namespace(namespace).Resource("configmaps").
		Param("watch", "true").
		Param("resourceVersion", rv).
		Param("timeoutSeconds", strconv.Itoa(int(watchTimeout.Seconds()))).
		SetHeader("Accept", "application/json").
		Stream(ctx)
	if err != nil {
		return fmt.Errorf("watch configmaps: %w", err)
	}
	defer body.Close()
	once()
	key := []byte(`"` + marker + `":"`)
	dec := json.NewDecoder(bufio.NewReaderSize(body, 64<<10))
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the server ended the watch")
			}
			return err
		}
		at := time.Now()
		if ev.Type == "ERROR" {
			return fmt.Errorf("watch error: %s", ev.Object)
		}
		t.saw(changeOf(ev.Object, key), at)
	}
}

// changeOf is the number in the marker annotation of obj, or -1.
func changeOf(obj, key []byte) int {
	i := bytes.Index(obj, key)
	if i < 0 {
		return -1
	}
	rest := obj[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return -1
	}
	k, err := strconv.Atoi(string(rest[:end]))
	if err != nil {
		return -1
	}
	return k
}

// tally counts, per change, the watchers that received it.
type tally struct {
	n   int
	log *slog.Logger

	mu      sync.Mutex
	changes map[int]*arrival
	other   int // events without a change number
}

// arrival is when a change reached its first and its last watcher.
type arrival struct {
	seen        int
	first, last time.Time
}

func newTally(n int, log *slog.Logger) *tally {
	return &tally{n: n, log: log, changes: map[int]*arrival{}}
}

func (t *tally) saw(change int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if change < 0 {
		t.other++
		return
	}
	a := t.changes[change]
	if a == nil {
		a = &arrival{first: at}
		t.changes[change] = a
	}
	a.seen++
	a.first, a.last = minTime(a.first, at), maxTime(a.last, at)
	if a.seen == t.n {
		t.log.Info("delivered", "change", change, "firstNs", a.first.UnixNano(), "lastNs", a.last.UnixNano(), "otherEvents", t.other)
		delete(t.changes, change)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
