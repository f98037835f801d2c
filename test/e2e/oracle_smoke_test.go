package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// The oracle agrees with a stream that is right and catches one that is
// not, for every bus.
func TestOracle(t *testing.T) {
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "oracle-"+b.name())
		r := startBridge(t, b.env(ns), nil)
		cms := kube(t).CoreV1().ConfigMaps(ns)
		for i := range 10 {
			if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := cms.Delete(t.Context(), "cm-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var v verdict
		poll.Until(t, 30*time.Second, func() (bool, string) {
			v = oracle(t, ns, b.read(t, ns))
			return v.mismatch == "", v.mismatch
		})
		r.stop(t)
		if v.events != 11 || v.duplicates != 0 || len(v.backwards) != 0 {
			t.Errorf("verdict %+v, want 11 events, no duplicates, nothing backwards", v)
		}

		// A stream that misses the last change does not pass.
		msgs := b.read(t, ns)
		if bad := oracle(t, ns, msgs[:len(msgs)-1]); bad.mismatch == "" {
			t.Error("the oracle accepted a stream without its last event")
		}
		// Nor does one that repeats an old event after a newer one.
		var added *wire.Message
		for _, m := range msgs {
			if m.Name == "cm-0" && m.Action == "added" {
				added = m
			}
		}
		if added == nil {
			t.Fatal("no added event of cm-0")
		}
		if bad := oracle(t, ns, append(msgs, added)); bad.duplicates != 1 || len(bad.backwards) != 1 || bad.mismatch == "" {
			t.Errorf("repeated old event: verdict %+v, want 1 duplicate, 1 backwards and a mismatch", bad)
		}
	})
}
