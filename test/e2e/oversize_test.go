package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// On a bus that takes at most busLimit bytes, in both content modes: an
// object that grows past the limit gets an updated event without its
// content, marked contentomitted; a large object that is then deleted
// gets an added and a deleted event so marked (and, on Kafka, its
// tombstone); an object that fits only without HTML escaping is published
// whole; ordinary objects flow throughout; the stream's view equals the
// API server's; and a restart publishes nothing again.
func TestOversizeObjects(t *testing.T) {
	for _, mode := range []string{"structured", "binary"} {
		t.Run(mode, func(t *testing.T) {
			forEachBusWith(t, busOptions{maxMessageBytes: busLimit}, func(t *testing.T, b bus) {
				ns := namespace(t, "oversize-"+b.name())
				env := withEnv(b.env(ns), ceModeEnv(mode))
				r := startBridge(t, env, nil)
				ctx := t.Context()
				cms := kube(t).CoreV1().ConfigMaps(ns)
				create := func(name string, data map[string]string) *corev1.ConfigMap {
					t.Helper()
					cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					return cm
				}
				update := func(cm *corev1.ConfigMap, data map[string]string) *corev1.ConfigMap {
					t.Helper()
					cm.Data = data
					cm, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					return cm
				}

				for i := range 5 {
					create(fmt.Sprintf("cm-%d", i), map[string]string{"v": "0"})
				}
				grows := create("grows", map[string]string{"v": "0"})
				grown := update(grows, pageOf('x', 2*busLimit))
				doomed := create("doomed", pageOf('x', 2*busLimit))
				if err := cms.Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				// 12 KB of "<" was 72 KB with HTML escaping.
				html := create("html", pageOf('<', busLimit*3/4))
				for i := range 5 {
					cm, err := cms.Get(ctx, fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					update(cm, map[string]string{"v": "1"})
				}

				var msgs []*wire.Message
				poll.Until(t, 30*time.Second, func() (bool, string) {
					msgs = b.read(t, ns)
					v := oracle(t, ns, msgs)
					gone := eventsOf(msgs, "doomed")
					return v.mismatch == "" && len(gone) > 0 && gone[len(gone)-1].Action == "deleted",
						fmt.Sprintf("view: %s; doomed: %s", v.mismatch, describe(gone))
				})
				if v := oracle(t, ns, msgs); v.duplicates != 0 || len(v.backwards) != 0 {
					t.Errorf("verdict %+v, want no duplicates, nothing backwards", v)
				}

				// The update past the limit, without its content.
				got := eventsOf(msgs, "grows")
				if len(got) != 2 || got[1].Action != "updated" || got[1].ResourceVersion != grown.ResourceVersion || !contentOmitted(got[1]) {
					t.Errorf("grows: %s; want added, then updated@%s without content", describe(got), grown.ResourceVersion)
				} else if why := identityOnly(got[1], string(grown.UID), grown.ResourceVersion); why != "" {
					t.Errorf("grows: updated@%s: %s", grown.ResourceVersion, why)
				}
				// The large object and its delete, without content.
				got = eventsOf(msgs, "doomed")
				if len(got) != 2 || got[0].Action != "added" || got[1].Action != "deleted" || !contentOmitted(got[0]) || !contentOmitted(got[1]) {
					t.Errorf("doomed: %s; want added and deleted, both without content", describe(got))
				} else {
					if why := identityOnly(got[0], string(doomed.UID), doomed.ResourceVersion); why != "" {
						t.Errorf("doomed: added: %s", why)
					}
					if got[1].UID != string(doomed.UID) || !rvLess(doomed.ResourceVersion, got[1].ResourceVersion) {
						t.Errorf("doomed: deleted uid %s at %s, want uid %s after %s", got[1].UID, got[1].ResourceVersion, doomed.UID, doomed.ResourceVersion)
					}
				}
				if ts := tombstones(t, b, ns); ts != nil && ts[ns+"/doomed"] != 1 {
					t.Errorf("doomed: %d tombstones, want 1", ts[ns+"/doomed"])
				}
				// Everything else whole.
				for _, m := range msgs {
					if contentOmitted(m) && m.Name != "grows" && m.Name != "doomed" {
						t.Errorf("%s %s@%s published without content", m.Name, m.Action, m.ResourceVersion)
					}
				}
				if got := eventsOf(msgs, "html"); len(got) != 1 || got[0].ResourceVersion != html.ResourceVersion {
					t.Errorf("html: %s, want added@%s with its content", describe(got), html.ResourceVersion)
				}

				// A restart publishes nothing again.
				r.stop(t)
				r = startBridge(t, env, nil)
				r.stop(t)
				if after := b.read(t, ns); len(after) != len(msgs) {
					t.Errorf("after a restart: %d events, want the %d there were; new: %s", len(after), len(msgs), describe(newEvents(msgs, after)))
				}
				if ts := tombstones(t, b, ns); ts != nil && ts[ns+"/doomed"] != 1 {
					t.Errorf("doomed after a restart: %d tombstones, want 1", ts[ns+"/doomed"])
				}
			})
		})
	}
}

// An object created too large for the bus, then a restart while it
// exists, then its delete, then another restart: every change is
// published once, in order (added, then deleted, both without content),
// and neither restart publishes or even tries anything about it again.
// Before, the skipped added left the checkpoint with the object's intent
// (its uid, no resourceVersion), which the restart diff reads as "maybe
// published": each restart listing the object tried its added again, and
// the one after its delete published the delete a second time, late.
func TestOversizeRestarts(t *testing.T) {
	ns := namespace(t, "oversize-restart")
	env := map[string]string{
		"BRIDGE_RESOURCES":  "configmaps",
		"BRIDGE_NAMESPACES": ns,
		"BRIDGE_CHECKPOINT": "file:" + filepath.Join(t.TempDir(), "checkpoint.db"),
	}
	cms := kube(t).CoreV1().ConfigMaps(ns)
	s := limitedSink(busLimit)
	// run starts a bridge, lets do make changes, waits until the sink has
	// seen want attempts in all, and stops the bridge.
	run := func(want int, do func()) {
		t.Helper()
		r := startBridge(t, env, s)
		do()
		poll.Until(t, 30*time.Second, func() (bool, string) {
			attempts := s.Attempts()
			return len(attempts) >= want, fmt.Sprintf("%d of %d attempts: %s", len(attempts), want, describe(attempts))
		})
		r.stop(t)
	}
	var doomed *corev1.ConfigMap
	run(2, func() {
		var err error
		doomed, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Data: pageOf('x', 2*busLimit)}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	})
	first := s.Attempts()
	run(len(first), func() {})
	second := s.Attempts()
	run(len(second)+1, func() {
		if err := cms.Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	third := s.Attempts()
	run(len(third), func() {})

	accepted, attempts := s.Accepted(), s.Attempts()
	if len(accepted) != 2 || accepted[0].Action != "added" || accepted[1].Action != "deleted" || !contentOmitted(accepted[0]) || !contentOmitted(accepted[1]) {
		t.Errorf("accepted %s; want doomed added, then deleted, both without content", describe(accepted))
	}
	if again := attempts[len(first):len(second)]; len(again) > 0 {
		t.Errorf("a restart while the object exists tried %s again", describe(again))
	}
	if again := attempts[len(third):]; len(again) > 0 {
		t.Errorf("a restart after its delete tried %s again", describe(again))
	}
	if len(accepted) > 0 && accepted[0].UID != string(doomed.UID) {
		t.Errorf("added uid %s, want %s", accepted[0].UID, doomed.UID)
	}
}
