package pod

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/test/eventdata"
	"github.com/kubebus/bridge/test/kubelet"
	"github.com/kubebus/bridge/test/metricstest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// TestChartReplicas runs the nats-kv-ha value set as the chart deploys it,
// two replicas with leader election, as two pods: one leads, both are
// ready, and the changes reach the bus. The leader is killed (SIGKILL)
// while changes go on; the standby takes the Lease within what the
// election's timing allows and publishes. Then the bus's objects equal a
// LIST, the stream stored no event twice, and no object's
// resourceVersion went backwards in the order the stream stored them.
func TestChartReplicas(t *testing.T) {
	start := time.Now()
	const namespace, apps, stream = "relay", "orders", "KUBE_PROD"
	srv := natsServer(t, namespace)
	// Every message the stream stores, from the stream's creation on: the
	// bridges create it, with the set's duplicate window.
	obs := observe(t, srv, stream)

	valueFiles := []string{"ci/nats-kv-ha-values.yaml"}
	port0, port1 := freePort(t), freePort(t)
	for port1 == port0 {
		port1 = freePort(t)
	}
	rel := install(t, "ha", namespace, valueFiles, natsValues(srv, port0, 2))
	if r := rel.deployment.Spec.Replicas; r == nil || *r != 2 {
		t.Fatalf("the Deployment has replicas %v, want 2", r)
	}
	// The pods share the host's network, where only one can listen on the
	// metrics port. The second pod is one of the same release rendered
	// with another metrics.port: the chart's own env, differing from the
	// installed Deployment's only in BRIDGE_METRICS_ADDR and the
	// container's port, which is checked below.
	other := renderDeployment(t, rel.name, rel.namespace, valueFiles, natsValues(srv, port1, 2))

	node := kubelet.NewNode(t, cp.RESTConfig(), kubelet.BridgeImage(t))
	pods := []*kubelet.Pod{
		node.Run(t, kubelet.PodOf(rel.deployment, "7b9f6c5d8-hx4kq")),
		node.Run(t, kubelet.PodOf(other, "7b9f6c5d8-m2zrt")),
	}
	sameContainerBut(t, pods[0].Object, pods[1].Object, "BRIDGE_METRICS_ADDR")
	election := setting(t, pods[0].Env, "LeaderElection")
	leaseName := setting(t, pods[0].Env, "LeaderElectionName")
	leaseDuration, err := time.ParseDuration(setting(t, pods[0].Env, "LeaseDuration"))
	if err != nil {
		t.Fatal(err)
	}
	retryPeriod, err := time.ParseDuration(setting(t, pods[0].Env, "RetryPeriod"))
	if err != nil {
		t.Fatal(err)
	}
	if election != "true" || leaseName != rel.deployment.Name || leaseDuration != 20*time.Second {
		t.Fatalf("leader election %q on Lease %q for %s, want true, on Lease %s for 20s as the set says",
			election, leaseName, leaseDuration, rel.deployment.Name)
	}
	for _, p := range pods {
		waitReady(t, p, 2*time.Minute)
	}
	t.Logf("both pods ready %s after the test began", time.Since(start).Round(time.Millisecond))

	cs := admin(t)
	holder := leaseHolder(t, cs, namespace, rel.deployment.Name, 30*time.Second, func(h string) bool {
		return slices.ContainsFunc(pods, func(p *kubelet.Pod) bool { return p.Name() == h })
	})
	leader, standby := pods[0], pods[1]
	if holder == standby.Name() {
		leader, standby = standby, leader
	}
	// Leading is what the replicas say too, and a standby is ready.
	poll.Until(t, 10*time.Second, func() (bool, string) {
		l, s := leading(leader), leading(standby)
		return l == 1 && s == 0, fmt.Sprintf("bridge_leader: %v on the Lease's holder %s, %v on %s", l, leader.Name(), s, standby.Name())
	})
	if !standby.Ready() {
		t.Errorf("the standby %s is not ready", standby.Name())
	}

	lw := changeDeploymentsOnNATS(t, cs, srv, apps)
	noRestarts(t, leader)
	noRestarts(t, standby)

	// The leader's node fails while changes go on. It is killed as soon
	// as it has published a burst of new Deployments, which nothing
	// changes afterwards. The burst takes a fraction of the checkpoint's
	// interval (BRIDGE_CHECKPOINT_INTERVAL, 1s), so the checkpoint
	// usually holds only intents for some of it: its successor publishes
	// those again; check and statesAgain below say what the stream kept.
	ch := startChanges(t, cs, apps)
	const burst = 10
	for i := range burst {
		if _, err := cs.AppsV1().Deployments(apps).Create(t.Context(), deployment(apps, fmt.Sprintf("burst-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lastOfBurst := fmt.Sprintf("%s/burst-%d", apps, burst-1)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return obs.stores(lastOfBurst), lastOfBurst + " not on the stream yet"
	})
	killed := time.Now()
	leader.Kill()
	uncommitted := uncommittedOf(t, srv, "bridge-checkpoint", "deployments.apps", apps, "burst-", burst)
	if uncommitted == 0 {
		t.Log("every creation of the burst was committed before the kill: no creation is published again in this run")
	}
	changesAtKill := ch.count()
	bound := takeoverBound(leaseDuration, retryPeriod)
	leaseHolder(t, cs, namespace, rel.deployment.Name, bound+2*time.Second, func(h string) bool { return h == standby.Name() })
	tookLease := time.Since(killed)
	lease, err := cs.CoordinationV1().Leases(namespace).Get(t.Context(), rel.deployment.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.AcquireTime == nil {
		t.Fatalf("the Lease held by %s has no acquireTime", holderOf(lease))
	}
	acquired := lease.Spec.AcquireTime.Time
	if d := acquired.Sub(killed); d > bound {
		t.Errorf("the standby acquired the Lease %s after the kill, beyond the %s the election's timing allows", d, bound)
	}
	changesInTakeover := ch.count() - changesAtKill
	var firstPublish time.Time
	poll.Until(t, 30*time.Second, func() (bool, string) {
		firstPublish = obs.firstStoredAfter(acquired)
		return !firstPublish.IsZero(), "no message stored since the standby took the Lease"
	})
	// A few more changes under the new leader, then the bus must catch up.
	after := ch.count()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return ch.count() >= after+5, fmt.Sprintf("%d changes since the first publish of the new leader", ch.count()-after)
	})
	total := ch.stop(t)
	if r := leading(standby); r != 1 {
		t.Errorf("bridge_leader on the new leader %s: %v, want 1", standby.Name(), r)
	}
	waitSameState(t, lw, deployments, apps, time.Minute)

	// The stream: every message it stored was observed, none twice, and
	// none of an object older than one before it.
	var last uint64
	poll.Until(t, 30*time.Second, func() (bool, string) {
		last = natstest.StreamState(t, srv.Conn(t), stream).LastSeq
		seen := obs.lastSeq()
		return seen == last, fmt.Sprintf("observed up to sequence %d of %d", seen, last)
	})
	obs.check(t, last)
	// An object's state stored again under another event id, which no
	// duplicate window drops: with a view (this set has filter and
	// dropFields), a creation published but not committed at the kill is
	// published again dated by the new leader's start (source's tracker),
	// so under a new id. A repeat, never a loss: publishing it at its old
	// resourceVersion could put it below a delete another view published
	// in between. Measured, not failed on.
	if again := obs.statesAgain(); len(again) > 0 {
		t.Logf("%d object states stored again under another event id (a creation published again after the takeover): %s", len(again), strings.Join(again, "; "))
	}
	noRestarts(t, standby)

	took, err := standby.Stop()
	if err != nil {
		t.Errorf("the new leader ended with %v on SIGTERM, want exit 0", err)
	}
	lease, err = cs.CoordinationV1().Leases(namespace).Get(t.Context(), rel.deployment.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %s after its holder stopped: it was not released", *h)
	}
	t.Logf("takeover: %d of the burst published but not committed at the kill; kill -> new holder seen %s (acquireTime %s after the kill; bound %s = leaseDuration %s + retries), kill -> first publish by the new leader %s; %d changes during the takeover, %d in all; %d messages stored; the new leader stopped in %s; test %s",
		uncommitted, tookLease.Round(time.Millisecond), acquired.Sub(killed).Round(time.Millisecond), bound, leaseDuration,
		firstPublish.Sub(killed).Round(time.Millisecond), changesInTakeover, total, last, took.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
}

// takeoverBound is the longest a standby can take to acquire a Lease
// whose holder died, with client-go's election: the holder renewed at
// most retry before it died; the standby notices a renewal up to one
// jittered retry (retry × (1 + JitterFactor 1.2)) after it, counts the
// lease duration from then, and tries again up to one jittered retry
// after that.
func takeoverBound(lease, retry time.Duration) time.Duration {
	jittered := retry + time.Duration(1.2*float64(retry))
	return lease + 2*jittered
}

// setting is the value of the bridge's configuration field (of
// internal/config.Config) in environ: its variable's, or the bridge's
// default when environ does not set it.
func setting(t *testing.T, environ []string, field string) string {
	t.Helper()
	f, ok := reflect.TypeFor[config.Config]().FieldByName(field)
	if !ok {
		t.Fatalf("the bridge's configuration has no field %s", field)
	}
	name := f.Tag.Get("env")
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return f.Tag.Get("envDefault")
}

// leaseHolder waits until the Lease namespace/name names a holder that ok
// accepts, and returns it.
func leaseHolder(t *testing.T, cs kubernetes.Interface, namespace, name string, timeout time.Duration, ok func(string) bool) string {
	t.Helper()
	var holder string
	poll.Until(t, timeout, func() (bool, string) {
		l, err := cs.CoordinationV1().Leases(namespace).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no Lease " + namespace + "/" + name
		}
		if err != nil {
			return false, err.Error()
		}
		holder = holderOf(l)
		return ok(holder), fmt.Sprintf("the Lease's holder is %q", holder)
	})
	return holder
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leading is p's bridge_leader gauge, or -1 when its metrics cannot be
// read.
func leading(p *kubelet.Pod) float64 {
	c := p.Object.Spec.Containers[0]
	s, err := metricstest.Scrape("127.0.0.1:" + strconv.Itoa(int(c.Ports[0].ContainerPort)))
	if err != nil {
		return -1
	}
	return s.Sum("bridge_leader")
}

// sameContainerBut fails t unless a's and b's containers, as the API
// server stored them, have the same env but for the variable except, and
// the same ports but for their numbers.
func sameContainerBut(t *testing.T, a, b *corev1.Pod, except string) {
	t.Helper()
	ca, cb := a.Spec.Containers[0], b.Spec.Containers[0]
	without := func(env []corev1.EnvVar) []corev1.EnvVar {
		return slices.DeleteFunc(slices.Clone(env), func(e corev1.EnvVar) bool { return e.Name == except })
	}
	if !apiequality.Semantic.DeepEqual(without(ca.Env), without(cb.Env)) {
		t.Fatalf("the pods' env differs beyond %s:\n%v\n%v", except, ca.Env, cb.Env)
	}
	if len(ca.Env) != len(cb.Env) || len(ca.Env) == len(without(ca.Env)) {
		t.Fatalf("the pods' env do not both set %s", except)
	}
	pa, pb := slices.Clone(ca.Ports), slices.Clone(cb.Ports)
	if len(pa) != 1 || len(pb) != 1 || pa[0].ContainerPort == pb[0].ContainerPort {
		t.Fatalf("the pods' ports %v and %v: want one each, on different numbers", pa, pb)
	}
	pb[0].ContainerPort = pa[0].ContainerPort
	if !apiequality.Semantic.DeepEqual(pa, pb) {
		t.Fatalf("the pods' ports differ beyond their numbers: %v, %v", ca.Ports, cb.Ports)
	}
	if !apiequality.Semantic.DeepEqual(ca.LivenessProbe, cb.LivenessProbe) || !apiequality.Semantic.DeepEqual(ca.ReadinessProbe, cb.ReadinessProbe) {
		t.Fatal("the pods' probes differ")
	}
}

// relabel sets a label of the Deployment namespace/name.
func relabel(t testing.TB, cs kubernetes.Interface, namespace, name, key, value string) {
	t.Helper()
	if err := updateLabel(t.Context(), cs, namespace, name, key, value); err != nil {
		t.Fatal(err)
	}
}

func updateLabel(ctx context.Context, cs kubernetes.Interface, namespace, name, key, value string) error {
	d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Labels[key] = value
	_, err = cs.AppsV1().Deployments(namespace).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

// changes makes a change to the Deployments of a namespace every
// changeInterval until stopped: a create, an update of web, and every
// other time a delete of a Deployment it created before.
type changes struct {
	stopped  chan struct{}
	stopping sync.Once
	done     chan error
	mu       sync.Mutex
	n        int
}

// changeInterval paces the changes: several per retry period of the
// election, few enough for a machine of two cores.
const changeInterval = 200 * time.Millisecond

func startChanges(t *testing.T, cs kubernetes.Interface, namespace string) *changes {
	c := &changes{stopped: make(chan struct{}), done: make(chan error, 1)}
	ctx := t.Context()
	go func() {
		tick := time.NewTicker(changeInterval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-c.stopped:
				c.done <- nil
				return
			case <-tick.C:
			}
			err := c.change(ctx, cs, namespace, i)
			if err != nil {
				c.done <- fmt.Errorf("change %d: %w", i, err)
				return
			}
		}
	}()
	t.Cleanup(func() { c.stopOnce() })
	return c
}

func (c *changes) change(ctx context.Context, cs kubernetes.Interface, namespace string, i int) error {
	name := fmt.Sprintf("takeover-%d", i)
	if _, err := cs.AppsV1().Deployments(namespace).Create(ctx, deployment(namespace, name), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := updateLabel(ctx, cs, namespace, "web", "generation", strconv.Itoa(i)); err != nil {
		return err
	}
	if i%2 == 1 {
		if err := cs.AppsV1().Deployments(namespace).Delete(ctx, fmt.Sprintf("takeover-%d", i-1), metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

// count is the number of rounds of changes made so far.
func (c *changes) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *changes) stopOnce() { c.stopping.Do(func() { close(c.stopped) }) }

// stop ends the changes, failing t if one failed, and returns how many
// rounds were made.
func (c *changes) stop(t *testing.T) int {
	t.Helper()
	c.stopOnce()
	if err := <-c.done; err != nil {
		t.Fatalf("changing Deployments: %v", err)
	}
	return c.count()
}

// uncommittedOf is how many of the objects prefix0 ... prefix<n-1> in
// namespace the nats-kv checkpoint in bucket holds no acknowledged
// position of for resource, read as the bridge reads it.
func uncommittedOf(t *testing.T, srv *natstest.Server, bucket, resource, namespace, prefix string, n int) int {
	t.Helper()
	store, err := natskv.Open(t.Context(), srv.Conn(t), bucket, natskv.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap, err := store.Load(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for i := range n {
		// An intent is what the bridge records before it publishes an
		// object's creation; the acknowledged position replaces it at the
		// next commit.
		if p, ok := snap.Objects[fmt.Sprintf("%s/%s%d", namespace, prefix, i)]; !ok || p.IsIntent() {
			missing++
		}
	}
	return missing
}

// observer holds every message a stream stored, in the stream's order,
// read by an ordered consumer from the stream's first message on.
type observer struct {
	mu   sync.Mutex
	msgs []stored
	// documents are the sequences of the cluster's discovery documents,
	// which are no events.
	documents []uint64
	errs      []string
}

// stored is a message as the stream stored it.
type stored struct {
	seq uint64
	at  time.Time
	ev  *wire.Message
}

// observe starts reading the stream as soon as it exists: it listens for
// the server's advisory of the stream's creation, so it must be called
// before anything creates the stream. A message the stream replaces (its
// subject's next) before the observer read it is a sequence the observer
// never sees, which check reports: the observer cannot miss one silently.
func observe(t *testing.T, srv *natstest.Server, stream string) *observer {
	t.Helper()
	nc := srv.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	o := &observer{}
	created := make(chan struct{}, 1)
	sub, err := nc.Subscribe(server.JSAdvisoryStreamCreatedPre+"."+stream, func(*nats.Msg) {
		select {
		case created <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	consuming := make(chan jetstream.ConsumeContext, 1)
	go func() {
		defer close(consuming)
		select {
		case <-created:
		case <-ctx.Done():
			return
		}
		cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			o.fail(fmt.Errorf("ordered consumer of %s: %w", stream, err))
			return
		}
		cc, err := cons.Consume(o.add, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { o.fail(err) }))
		if err != nil {
			o.fail(fmt.Errorf("consuming %s: %w", stream, err))
			return
		}
		consuming <- cc
	}()
	t.Cleanup(func() {
		cancel()
		_ = sub.Unsubscribe()
		if cc, ok := <-consuming; ok {
			cc.Stop()
		}
	})
	return o
}

func (o *observer) add(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		o.fail(fmt.Errorf("metadata of a message on %s: %w", m.Subject(), err))
		return
	}
	if m.Headers().Get("Content-Type") == wire.DiscoveryContentType {
		if _, err := wire.UnmarshalDiscovery(m.Data()); err != nil {
			o.fail(fmt.Errorf("sequence %d: %w", md.Sequence.Stream, err))
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		o.documents = append(o.documents, md.Sequence.Stream)
		return
	}
	ev, err := wire.NATS.Decode(m.Data(), wire.Headers(m.Headers()))
	if err != nil {
		o.fail(fmt.Errorf("sequence %d: %w", md.Sequence.Stream, err))
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.msgs = append(o.msgs, stored{seq: md.Sequence.Stream, at: md.Timestamp, ev: ev})
}

// seqs are the sequences of every message observed, in order.
func (o *observer) seqs() []uint64 {
	out := slices.Clone(o.documents)
	for _, m := range o.msgs {
		out = append(out, m.seq)
	}
	slices.Sort(out)
	return out
}

func (o *observer) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err.Error())
}

// lastSeq is the stream sequence of the last message observed.
func (o *observer) lastSeq() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	seqs := o.seqs()
	if len(seqs) == 0 {
		return 0
	}
	return seqs[len(seqs)-1]
}

// stores reports whether the stream stored an event of the object
// subject ("namespace/name").
func (o *observer) stores(subject string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.ContainsFunc(o.msgs, func(m stored) bool { return m.ev.Subject == subject })
}

// firstStoredAfter is when the stream stored its first message after
// since, or zero if it has stored none yet.
func (o *observer) firstStoredAfter(since time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.msgs {
		if !m.at.Before(since) {
			return m.at
		}
	}
	return time.Time{}
}

// statesAgain lists the creations and updates that carry an object's
// state (uid and the object's own metadata.resourceVersion) stored before
// under another event id.
func (o *observer) statesAgain() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	type state struct{ uid, rv string }
	first := map[state]stored{}
	var again []string
	for _, m := range o.msgs {
		if m.ev.Action == "deleted" {
			continue
		}
		rv, err := eventdata.ObjectResourceVersion(m.ev.Data)
		if err != nil {
			again = append(again, fmt.Sprintf("sequence %d: %v", m.seq, err))
			continue
		}
		k := state{m.ev.UID, rv}
		if f, ok := first[k]; ok {
			again = append(again, fmt.Sprintf("%s at %s: sequence %d (%s, event at %s), then %d (%s, event at %s)",
				m.ev.Subject, k.rv, f.seq, f.ev.Action, f.ev.ResourceVersion, m.seq, m.ev.Action, m.ev.ResourceVersion))
			continue
		}
		first[k] = m
	}
	return again
}

// check fails t unless the observer saw every sequence from 1 to last,
// each once, no event id twice, and, per object (uid), resourceVersions
// that only go up: none backwards, none stored twice.
func (o *observer) check(t *testing.T, last uint64) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) > 0 {
		t.Errorf("the observer: %s", strings.Join(o.errs, "; "))
	}
	var gaps []string
	next := uint64(1)
	for _, seq := range o.seqs() {
		if seq != next {
			gaps = append(gaps, fmt.Sprintf("%d..%d", next, seq-1))
		}
		next = seq + 1
	}
	if next != last+1 {
		gaps = append(gaps, fmt.Sprintf("%d..%d", next, last))
	}
	if len(gaps) > 0 {
		t.Errorf("the observer missed stream sequences %s (replaced before it read them?): duplicates could hide there", strings.Join(gaps, ", "))
	}
	ids := map[string]uint64{}
	rvs := map[string]uint64{}
	var dups, repeats, backwards []string
	for _, m := range o.msgs {
		if first, ok := ids[m.ev.ID]; ok {
			dups = append(dups, fmt.Sprintf("%s (%s) at %d and %d", m.ev.ID, m.ev.Subject, first, m.seq))
		}
		ids[m.ev.ID] = m.seq
		rv, err := strconv.ParseUint(m.ev.ResourceVersion, 10, 64)
		if err != nil {
			t.Errorf("sequence %d: resourceVersion %q: %v", m.seq, m.ev.ResourceVersion, err)
			continue
		}
		switch prev, ok := rvs[m.ev.UID]; {
		case !ok:
		case rv < prev:
			backwards = append(backwards, fmt.Sprintf("%s %s: %d after %d at sequence %d", m.ev.Resource.Resource, m.ev.Subject, rv, prev, m.seq))
		case rv == prev:
			// The same state again under another id (another action, or
			// a snapshot's): a repeat all the same.
			repeats = append(repeats, fmt.Sprintf("%s %s at %d, %s at sequence %d", m.ev.Resource.Resource, m.ev.Subject, rv, m.ev.Action, m.seq))
		}
		rvs[m.ev.UID] = max(rv, rvs[m.ev.UID])
	}
	if len(dups) > 0 {
		t.Errorf("%d of %d stored messages repeat an event: %s", len(dups), len(o.msgs), strings.Join(dups, "; "))
	}
	if len(repeats) > 0 {
		t.Errorf("%d of %d stored messages repeat an object's state: %s", len(repeats), len(o.msgs), strings.Join(repeats, "; "))
	}
	if len(backwards) > 0 {
		t.Errorf("resourceVersions went backwards: %s", strings.Join(backwards, "; "))
	}
}
