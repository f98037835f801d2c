package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	consumerkafka "github.com/kubebus/bridge/consumer/kafka"
	consumernats "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// busInformer is a client-go SharedIndexInformer on the ConfigMaps of one
// namespace, fed from a bus by a consumer ListerWatcher. Its handlers check
// what a consumer relies on: an object's API resourceVersion never goes
// backwards, and a delete only comes for an object that was added.
type busInformer struct {
	name   string
	lw     *consumer.ListerWatcher
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// held is what the handlers were told the informer holds, by key.
	held map[string]heldObject
	// latest is the newest API resourceVersion handed to a handler, per uid.
	latest     map[string]uint64
	violations []string
	events     int
}

type heldObject struct {
	uid string
	rv  string
}

// informerConfig says how a busInformer reaches its bus.
type informerConfig struct {
	// newLW makes the ListerWatcher for opts.
	newLW func(t *testing.T, opts consumer.Options) *consumer.ListerWatcher
	// cluster is the BRIDGE_CLUSTER_NAME the informer reads; "" is the
	// e2e bridges' "e2e".
	cluster string
}

// natsInformers reads the state stream KUBE of srv, as the bridge's default
// state layout fills it.
func natsInformers(srv *natstest.Server) informerConfig {
	return informerConfig{newLW: func(t *testing.T, opts consumer.Options) *consumer.ListerWatcher {
		t.Helper()
		lw, err := consumernats.NewListerWatcher(srv.JetStream(t), consumernats.Config{}, opts)
		if err != nil {
			t.Fatalf("nats ListerWatcher: %v", err)
		}
		return lw
	}}
}

// kafkaInformers reads the topics of c with the given prefix.
func kafkaInformers(c *kafkatest.Cluster, prefix string) informerConfig {
	return informerConfig{newLW: func(t *testing.T, opts consumer.Options) *consumer.ListerWatcher {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		lw, err := consumerkafka.NewListerWatcher(cl, consumerkafka.Config{TopicPrefix: prefix}, opts)
		if err != nil {
			t.Fatalf("kafka ListerWatcher: %v", err)
		}
		return lw
	}}
}

// informerOptions are the consumer options of the ConfigMaps of ns, as the
// e2e bridges publish them (cluster "e2e").
func informerOptions(t *testing.T, name, ns, snapshot string) consumer.Options {
	return consumer.Options{
		Cluster:      "e2e",
		Resource:     schema.GroupResource{Resource: "configmaps"},
		Namespace:    ns,
		SnapshotFile: snapshot,
		Name:         name,
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// startInformer runs an informer named name on ns from the bus of ic, and
// waits until it has synced. snapshot is the consumer's snapshot file, or "".
func startInformer(t *testing.T, ic informerConfig, name, ns, snapshot string) *busInformer {
	t.Helper()
	i := &busInformer{name: name, held: map[string]heldObject{}, latest: map[string]uint64{}, done: make(chan struct{})}
	opts := informerOptions(t, name, ns, snapshot)
	if ic.cluster != "" {
		opts.Cluster = ic.cluster
	}
	i.lw = ic.newLW(t, opts)
	i.inf = cache.NewSharedIndexInformer(i.lw, &unstructured.Unstructured{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_, err := i.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { i.seen("add", nil, obj) },
		UpdateFunc: func(old, obj any) { i.seen("update", old, obj) },
		DeleteFunc: i.deleted,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	i.cancel = cancel
	go func() {
		defer close(i.done)
		i.inf.RunWithContext(ctx)
	}()
	t.Cleanup(func() { i.stop(t) })
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), i.inf.HasSynced) {
		t.Fatalf("informer %s did not sync within a minute", name)
	}
	return i
}

// stop stops the informer and closes its ListerWatcher; safe to call twice.
func (i *busInformer) stop(t *testing.T) {
	t.Helper()
	i.cancel()
	select {
	case <-i.done:
	case <-time.After(30 * time.Second):
		t.Errorf("informer %s did not stop within 30s", i.name)
	}
	if err := i.lw.Close(); err != nil {
		t.Errorf("informer %s: close: %v", i.name, err)
	}
}

func objectOf(obj any) (*unstructured.Unstructured, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// apiRV is the API server's resourceVersion of an object from the bus.
func apiRV(u *unstructured.Unstructured) string {
	return u.GetAnnotations()[consumer.AnnotationResourceVersion]
}

func (i *busInformer) seen(how string, old, obj any) {
	u, ok := objectOf(obj)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.events++
	if !ok {
		i.violations = append(i.violations, fmt.Sprintf("%s: %T, not unstructured", how, obj))
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	rv, err := strconv.ParseUint(apiRV(u), 10, 64)
	if err != nil {
		i.violations = append(i.violations, fmt.Sprintf("%s %s: API resourceVersion %q: %v", how, key, apiRV(u), err))
		return
	}
	if prev, ok := i.latest[string(u.GetUID())]; ok && rv < prev {
		i.violations = append(i.violations, fmt.Sprintf("%s %s (uid %s): API resourceVersion went back from %d to %d", how, key, u.GetUID(), prev, rv))
	}
	if o, ok := objectOf(old); ok && o.GetUID() == u.GetUID() {
		if prev, err := strconv.ParseUint(apiRV(o), 10, 64); err == nil && rv < prev {
			i.violations = append(i.violations, fmt.Sprintf("%s %s: old object at %d, new at %d", how, key, prev, rv))
		}
	}
	i.latest[string(u.GetUID())] = max(i.latest[string(u.GetUID())], rv)
	i.held[key] = heldObject{uid: string(u.GetUID()), rv: apiRV(u)}
}

func (i *busInformer) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := objectOf(obj)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.events++
	if !ok {
		i.violations = append(i.violations, fmt.Sprintf("delete: %T, not unstructured", obj))
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	h, ok := i.held[key]
	switch {
	case !ok:
		i.violations = append(i.violations, fmt.Sprintf("delete of %s, which was never added", key))
	case h.uid != string(u.GetUID()):
		i.violations = append(i.violations, fmt.Sprintf("delete of %s uid %s, but uid %s was added", key, u.GetUID(), h.uid))
	}
	delete(i.held, key)
}

// problems returns what the handlers saw that they must never see.
func (i *busInformer) problems() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.violations)
}

// cached is the informer's cache: key -> uid and API resourceVersion.
func (i *busInformer) cached() map[string]heldObject {
	out := map[string]heldObject{}
	for _, obj := range i.inf.GetStore().List() {
		u := obj.(*unstructured.Unstructured)
		out[u.GetNamespace()+"/"+u.GetName()] = heldObject{uid: string(u.GetUID()), rv: apiRV(u)}
	}
	return out
}

// listed is the API server's LIST of the ConfigMaps of ns.
func listed(t *testing.T, ns string) map[string]heldObject {
	t.Helper()
	return listedIn(t, kube(t), ns)
}

// listedIn is the LIST of the ConfigMaps of ns of the API server of kc.
func listedIn(t *testing.T, kc kubernetes.Interface, ns string) map[string]heldObject {
	t.Helper()
	l, err := kc.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	out := map[string]heldObject{}
	for _, cm := range l.Items {
		out[cm.Namespace+"/"+cm.Name] = heldObject{uid: string(cm.UID), rv: cm.ResourceVersion}
	}
	return out
}

// diffState describes how an informer's cache differs from LIST, or
// returns "" when they are equal: same keys, uids and resourceVersions.
func diffState(cached, want map[string]heldObject) string {
	var diffs []string
	for k, w := range want {
		switch c, ok := cached[k]; {
		case !ok:
			diffs = append(diffs, k+" missing")
		case c != w:
			diffs = append(diffs, fmt.Sprintf("%s is %s@%s, LIST has %s@%s", k, c.uid, c.rv, w.uid, w.rv))
		}
	}
	for k := range cached {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, k+" not in LIST")
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	slices.Sort(diffs)
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("and %d more", len(diffs)-8))
	}
	return fmt.Sprintf("%d cached, %d listed: %s", len(cached), len(want), strings.Join(diffs, "; "))
}

// waitEqualsList polls until the informer's cache equals the API server's
// LIST of ns, failing after timeout.
func (i *busInformer) waitEqualsList(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	poll.Until(t, timeout, func() (bool, string) {
		d := diffState(i.cached(), listed(t, ns))
		return d == "", i.name + ": " + d
	})
}

// checkHandlers fails the test if the informer's handlers saw anything they
// must never see.
func (i *busInformer) checkHandlers(t *testing.T) {
	t.Helper()
	if p := i.problems(); len(p) > 0 {
		t.Errorf("informer %s: %d handler violations, first: %s", i.name, len(p), strings.Join(p[:min(len(p), 5)], "; "))
	}
}
