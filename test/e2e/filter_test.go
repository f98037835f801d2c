package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/poll"
)

// Namespace filters, label selectors and field selectors each hold: objects
// outside them produce no message.
func TestFilters(t *testing.T) {
	type obj struct {
		ns     int // index into the test's namespaces
		name   string
		labels map[string]string
	}
	keep := map[string]string{"app": "keep"}
	for _, tc := range []struct {
		name string
		env  func(ns []string) map[string]string
		objs []obj
		want []string // names expected, in ns[0] unless prefixed
	}{
		{
			name: "namespaces",
			env: func(ns []string) map[string]string {
				return map[string]string{"BRIDGE_NAMESPACES": ns[0] + "," + ns[1]}
			},
			objs: []obj{{2, "outside", nil}, {0, "in-first", nil}, {1, "in-second", nil}},
			want: []string{"0/in-first", "1/in-second"},
		},
		{
			name: "label selector",
			env: func(ns []string) map[string]string {
				return map[string]string{"BRIDGE_NAMESPACES": ns[0], "BRIDGE_LABEL_SELECTOR": "app=keep"}
			},
			objs: []obj{{0, "no-labels", nil}, {0, "other-label", map[string]string{"app": "drop"}}, {0, "labelled", keep}},
			want: []string{"0/labelled"},
		},
		{
			name: "field selector",
			env: func(ns []string) map[string]string {
				return map[string]string{"BRIDGE_NAMESPACES": ns[0], "BRIDGE_FIELD_SELECTOR": "metadata.name!=excluded"}
			},
			objs: []obj{{0, "excluded", nil}, {0, "included", nil}},
			want: []string{"0/included"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := []string{namespace(t, "filter"), namespace(t, "filter"), namespace(t, "filter")}
			env := tc.env(ns)
			env["BRIDGE_RESOURCES"] = "configmaps"
			s := &sinktest.Recorder{}
			b := startBridge(t, env, s)
			for _, o := range tc.objs {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: o.name, Labels: o.labels}}
				if _, err := kube(t).CoreV1().ConfigMaps(ns[o.ns]).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			for _, w := range tc.want {
				var i int
				var name string
				fmt.Sscanf(w, "%d/%s", &i, &name)
				want = append(want, ns[i]+"/"+name)
			}
			// The wanted objects are created after the unwanted ones in
			// their namespace, so once they arrive, any unwanted message
			// would have arrived too.
			poll.Until(t, 30*time.Second, func() (bool, string) {
				return s.Len() >= len(want), fmt.Sprintf("%d of %d messages", s.Len(), len(want))
			})
			b.stop(t)
			var got []string
			for _, m := range s.Accepted() {
				got = append(got, m.Key())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("messages about %v, want %v", got, want)
			}
		})
	}
}
