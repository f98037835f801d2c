package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// The crash, outage and shutdown scenarios of issue 5 share these
// helpers: writers that churn ConfigMaps and count what they did, a cheap
// probe of how much a bus holds, the checkpoint as a dead bridge left it,
// and the bookkeeping of which run of the bridge published what.

// procEnv turns a bridge environment into KEY=VALUE strings, sorted, for a
// bridge run as a process.
func procEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// churners create, update and delete ConfigMaps cm-000..cm-(objects-1) of a
// namespace from several goroutines at once, at random, until stopped. The
// goroutines share the names, so they also conflict with each other, as
// independent writers do.
type churners struct {
	made   atomic.Int64 // changes the API server accepted
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// startChurners starts n writers, seeded from seed, and stops them when the
// test ends if stop was not called before.
func startChurners(t *testing.T, ns string, objects, n int, seed uint64) *churners {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &churners{cancel: cancel}
	for i := range n {
		cms := kube(t).CoreV1().ConfigMaps(ns) // a client each: its own rate limit
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		w.wg.Go(func() {
			for ctx.Err() == nil {
				name := fmt.Sprintf("cm-%03d", rng.IntN(objects))
				var err error
				if rng.IntN(10) < 2 {
					err = cms.Delete(ctx, name, metav1.DeleteOptions{})
				} else {
					var cm *corev1.ConfigMap
					cm, err = cms.Get(ctx, name, metav1.GetOptions{})
					switch {
					case apierrors.IsNotFound(err):
						_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
					case err == nil:
						cm.Data = map[string]string{"n": fmt.Sprint(rng.Uint64())}
						_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					}
				}
				switch {
				case err == nil:
					w.made.Add(1)
				case ctx.Err() != nil, apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
				default:
					t.Errorf("writer: %s: %v", name, err)
					return
				}
			}
		})
	}
	t.Cleanup(func() { w.stop() })
	return w
}

// stop stops the writers, waits for them and returns how many changes they
// made.
func (w *churners) stop() int64 {
	w.once.Do(func() {
		w.cancel()
		w.wg.Wait()
	})
	return w.made.Load()
}

// waitMade waits until the writers made n more changes than before.
func (w *churners) waitMade(t *testing.T, before, n int64, why string) {
	t.Helper()
	poll.Until(t, time.Minute, func() (bool, string) {
		got := w.made.Load() - before
		return got >= n, fmt.Sprintf("%d of %d changes made %s", got, n, why)
	})
}

// busProbe counts, cheaply, what a bus holds about the ConfigMaps of one
// namespace: the messages stored for them in NATS, or the records of their
// topic in Kafka (tombstones included). It only grows, so it tells
// progress without reading and decoding everything.
type busProbe struct {
	count func() int
}

func newBusProbe(t *testing.T, b bus, ns string) *busProbe {
	t.Helper()
	switch b := b.(type) {
	case *natsBus:
		nc := b.srv.Conn(t)
		return &busProbe{count: func() int { return int(natsCount(t, nc, "KUBE", natsSubjects(ns))) }}
	case *kafkaBus:
		// One admin client for the whole test: the cluster's helpers make
		// a client per call.
		adm := kadm.NewClient(b.c.Client())
		topic := "kube-" + ns + ".configmaps"
		return &busProbe{count: func() int {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				return 0 // not created yet, or the cluster refuses requests
			}
			n := 0
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					n += int(o.Offset)
				}
			})
			return n
		}}
	}
	t.Fatalf("no probe for bus %T", b)
	return nil
}

// waitGrown waits until the bus holds at least n messages more than
// before, and returns what it holds then.
func (p *busProbe) waitGrown(t *testing.T, before, n int, why string) int {
	t.Helper()
	var got int
	poll.Until(t, time.Minute, func() (bool, string) {
		got = p.count()
		return got-before >= n, fmt.Sprintf("%d of %d new messages on the bus %s", got-before, n, why)
	})
	return got
}

// settleOracle waits, up to timeout, until the oracle finds that the bus's
// view of ns equals the API server's LIST. It returns the oracle's last
// verdict (whose mismatch is "" when they converged) and the messages it
// judged. It reads the whole bus only when the probe shows no progress
// since its last look, as a full read of a Kafka topic costs two clients.
func settleOracle(t *testing.T, b bus, ns string, p *busProbe, timeout time.Duration) (verdict, []*wire.Message) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := -1
	for {
		n := p.count()
		if n == last || time.Now().After(deadline) {
			msgs := b.read(t, ns)
			v := oracle(t, ns, msgs)
			if v.mismatch == "" || time.Now().After(deadline) {
				return v, msgs
			}
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
}

// explainMismatch describes, for every object whose latest state in msgs
// differs from the API server's, what the server holds and every message
// of the object, with the run that published it (see runOfMsg).
func explainMismatch(t *testing.T, ns string, msgs []*wire.Message, ends []time.Time) string {
	t.Helper()
	list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return "list: " + err.Error()
	}
	live := map[string]corev1.ConfigMap{}
	for _, cm := range list.Items {
		live[ns+"/"+cm.Name] = cm
	}
	history := byKey(msgs)
	keys := slices.Sorted(maps.Keys(history))
	for key := range live {
		if _, ok := history[key]; !ok {
			keys = append(keys, key)
		}
	}
	var out strings.Builder
	for _, key := range keys {
		h := history[key]
		cm, alive := live[key]
		var last *wire.Message
		if len(h) > 0 {
			last = h[len(h)-1]
		}
		switch {
		case alive && last != nil && last.Action != "deleted" && stateRV(last) == cm.ResourceVersion:
			continue
		case !alive && (last == nil || last.Action == "deleted"):
			continue
		}
		if alive {
			fmt.Fprintf(&out, "\n%s: the API server has uid %s at %s; the stream has", key, cm.UID, cm.ResourceVersion)
		} else {
			fmt.Fprintf(&out, "\n%s: the API server has nothing; the stream has", key)
		}
		for _, m := range h {
			fmt.Fprintf(&out, "\n\trun %d: %s", runOfMsg(m, ends), describeMsg(m))
		}
	}
	return out.String()
}

// readCheckpoint returns what the checkpoint of a bridge configured by
// b.env(ns) holds for configmaps. Call it while no bridge writes to it.
func readCheckpoint(t *testing.T, b bus, ns string) checkpoint.Snapshot {
	t.Helper()
	return readCheckpointOf(t, b, b.env(ns))
}

// readCheckpointOf is readCheckpoint for a bridge on b configured by env,
// whose checkpoint may also be a file.
func readCheckpointOf(t *testing.T, b bus, env map[string]string) checkpoint.Snapshot {
	t.Helper()
	cfg, err := config.Load(procEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	kind, name := cfg.CheckpointKind()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var store checkpoint.Store
	switch kind {
	case config.CheckpointNATSKV:
		nc, err := nats.Connect(cfg.NATS.URL, busNATSOptions(b)...)
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
		defer nc.Close()
		store, err = natskv.Open(ctx, nc, name, natskv.Options{}, nil)
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	case config.CheckpointKafka:
		store, err = kafkastore.Open(ctx, cfg.KafkaSettings().Conn(), name, cfg.KafkaCheckpoint(), nil)
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	case config.CheckpointFile:
		store, err = checkpoint.OpenFile(name)
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	default:
		t.Fatalf("bus %s keeps its checkpoint in %q", b.name(), cfg.Checkpoint)
	}
	defer store.Close()
	snap, err := store.Load(ctx, "configmaps")
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return snap
}

func busNATSOptions(b bus) []nats.Option {
	if nb, ok := b.(*natsBus); ok {
		return nb.srv.ClientOptions()
	}
	return nil
}

// ckptCovers reports whether a checkpoint already reflects m, so that a
// bridge starting from it has no reason to publish m again: for a delete,
// the checkpoint no longer holds that incarnation of the object; otherwise
// it holds the object, same uid, at m's resourceVersion or later. A
// position without a resourceVersion (the object is known, no state of it
// delivered) covers no state.
func ckptCovers(snap checkpoint.Snapshot, m *wire.Message) bool {
	pos, ok := snap.Objects[m.Key()]
	if m.Action == "deleted" {
		return !ok || pos.UID != m.UID
	}
	return ok && pos.UID == m.UID && pos.ResourceVersion != "" && !rvLess(pos.ResourceVersion, m.ResourceVersion)
}

// runOfMsg is which run of the bridge published m: the number of bridges
// killed or stopped (at the instants in ends) before m was observed. A
// message's time is when the process that published it observed the
// change, and that process was alive then.
func runOfMsg(m *wire.Message, ends []time.Time) int {
	n := 0
	for _, e := range ends {
		if m.Time.Before(e) {
			break
		}
		n++
	}
	return n
}

// keyRV names one state of an object in the stream.
type keyRV struct{ key, rv string }

func (k keyRV) String() string { return k.key + "@" + k.rv }

// describeMsg is m for an error message, saying whether the restart diff
// found it.
func describeMsg(m *wire.Message) string {
	how := "watch"
	if m.Snapshot {
		how = "restart diff"
	}
	return fmt.Sprintf("%s %s uid %s at %s (%s, id %s)", m.Action, m.Key(), m.UID, m.ResourceVersion, how, m.ID)
}

// repeatsOutOfPlace lists the messages of msgs (in stream order per
// object) that repeat an earlier message of their object without directly
// following it.
func repeatsOutOfPlace(msgs []*wire.Message) []string {
	var out []string
	for _, seq := range byKey(msgs) {
		seen := map[string]bool{}
		for i, m := range seq {
			if seen[m.ID] && seq[i-1].ID != m.ID {
				out = append(out, describeMsg(m)+" after "+describeMsg(seq[i-1]))
			}
			seen[m.ID] = true
		}
	}
	slices.Sort(out)
	return out
}
