package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/poll"
)

// Issue 25, item 3: a filter turned off publishes each object that
// re-enters the stream so that a consumer deduping by resourceVersion
// takes it. ConfigMaps published by a run without a view leave the view
// of the next, filtered run: when it starts, because the filter does not
// match them (dated by the revision read then); by a change made while
// the bridge was down; and by a change made while it runs (at their own
// resourceVersions). The objects that stay are not published again, so
// their positions hold no view state. The third run, without the filter,
// publishes every one that left as added, at a resourceVersion later
// than its own, though none changed since; a consumer's informer that
// ran throughout, reading the state on the bus, ends equal to LIST.
func TestViewFilterTurnedOff(t *testing.T) {
	const filter = `!("out" in labels)`
	forEachBusWith(t, busOptions{natsLayout: "state"}, func(t *testing.T, b bus) {
		ns := namespace(t, "view-off")
		cms := kube(t).CoreV1().ConfigMaps(ns)
		create := func(name string, labels map[string]string) string {
			t.Helper()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"v": name}}
			cm, err := cms.Create(t.Context(), cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return cm.ResourceVersion
		}
		leave := func(name string) string {
			t.Helper()
			cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Labels = map[string]string{"out": "yes"}
			if cm, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			return cm.ResourceVersion
		}
		rvs := map[string]string{} // key → resourceVersion
		var stays, definition, down, live []string
		for i := range 2 {
			for _, g := range []struct {
				names  *[]string
				prefix string
				labels map[string]string
			}{{&stays, "stays", nil}, {&definition, "definition", map[string]string{"out": "yes"}}, {&down, "down", nil}, {&live, "live", nil}} {
				name := fmt.Sprintf("%s-%d", g.prefix, i)
				*g.names = append(*g.names, name)
				rvs[ns+"/"+name] = create(name, g.labels)
			}
		}
		noFilter := viewEnv(b, ns, "configmaps", nil)
		filtered := viewEnv(b, ns, "configmaps", map[string]string{"BRIDGE_FILTER": filter})

		// First run, no view: every object is published. The informer
		// runs from here to the end.
		br := startBridge(t, noFilter, nil)
		inf := startInformer(t, informersOf(b, ns), "throughout", ns, "")
		inf.waitEqualsList(t, ns, 30*time.Second)
		br.stop(t)

		// Second run, filtered.
		for _, n := range down {
			rvs[ns+"/"+n] = leave(n)
		}
		br = startBridge(t, filtered, nil)
		for _, n := range live {
			rvs[ns+"/"+n] = leave(n)
		}
		poll.Until(t, 30*time.Second, func() (bool, string) {
			want := listed(t, ns)
			for _, n := range slices.Concat(definition, down, live) {
				delete(want, ns+"/"+n)
			}
			d := diffState(inf.cached(), want)
			return d == "", "filtered run: " + d
		})
		br.stop(t)
		before := b.read(t, ns)

		// Third run, the filter turned off.
		startBridge(t, noFilter, nil).stop(t)
		inf.waitEqualsList(t, ns, 30*time.Second)
		inf.checkHandlers(t)
		want := map[string][]string{}
		for _, n := range slices.Concat(definition, down, live) {
			want[ns+"/"+n] = []string{"added@" + datedRV}
		}
		if d := diffChanges(datedChanges(newSince(before, b.read(t, ns)), rvs), want); d != "" {
			t.Errorf("the filter turned off: the events differ:\n%s", d)
		}
	})
}
