package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Issue 14, acceptance 1: with BRIDGE_FILTER `object.status.phase !=
// "Succeeded"` on Pods (their status set through the status subresource,
// as a kubelet sets it), the stream is a view of the Pods that have not
// succeeded. A Pod that succeeds produces exactly one deleted event, with
// the reason left-filter; moved back to Running it produces one added. A
// Pod that succeeded before the bridge started is never published. On
// Kafka, a consumer's compacted view of the topic (deleted events and
// their tombstones remove objects) equals the API server's LIST filtered
// by the same rule.
func TestViewPodsLeaveTheFilter(t *testing.T) {
	const filter = `object.status.phase != "Succeeded"`
	in := func(o *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
		return phase != string(corev1.PodSucceeded)
	}
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "view-pods")
		key := func(name string) string { return ns + "/" + name }
		want := map[string][]string{}

		// Before the start: a Pod that has succeeded already, which the
		// view never holds, and a running one, which the initial list
		// adds.
		createPod(t, ns, "done-before")
		setPodPhase(t, ns, "done-before", corev1.PodSucceeded)
		createPod(t, ns, "running-before")
		rv := setPodPhase(t, ns, "running-before", corev1.PodRunning)
		want[key("running-before")] = []string{"added@" + rv}

		br := startBridge(t, viewEnv(b, ns, "pods", map[string]string{"BRIDGE_FILTER": filter}), nil)
		waitForChange(t, b, ns, podKind, key("running-before"), "added@"+rv)

		// One Pod through every step, each awaited before the next, so
		// that none is merged with another on its way to the bus: step
		// expects change of the Pod name, and waits for it.
		step := func(name, change string) {
			t.Helper()
			want[key(name)] = append(want[key(name)], change)
			waitForChange(t, b, ns, podKind, key(name), change)
		}
		rv = createPod(t, ns, "mover")
		step("mover", "added@"+rv)
		rv = setPodPhase(t, ns, "mover", corev1.PodRunning)
		step("mover", "updated@"+rv)
		setPodPhase(t, ns, "mover", corev1.PodSucceeded)
		step("mover", "deleted("+leftFilter+")")
		rv = setPodPhase(t, ns, "mover", corev1.PodRunning)
		step("mover", "added@"+rv)

		// More Pods for the consumer's view: one that stays Pending, one
		// that fails (still in the view), one that succeeds and stays so.
		rv = createPod(t, ns, "pending")
		step("pending", "added@"+rv)
		rv = createPod(t, ns, "fails")
		step("fails", "added@"+rv)
		rv = setPodPhase(t, ns, "fails", corev1.PodFailed)
		step("fails", "updated@"+rv)
		rv = createPod(t, ns, "finishes")
		step("finishes", "added@"+rv)
		setPodPhase(t, ns, "finishes", corev1.PodSucceeded)
		step("finishes", "deleted("+leftFilter+")")
		br.stop(t)

		msgs := b.readKinds(t, ns, []watchedKind{podKind})
		if d := diffChanges(changesByKey(msgs), want); d != "" {
			t.Errorf("the view's events differ:\n%s", d)
		}
		for _, m := range msgs {
			if m.Action != "deleted" && reasonOf(m) != "" {
				t.Errorf("%s: %s event with reason %q", m.Key(), m.Action, reasonOf(m))
			}
		}
		if kb, ok := b.(*kafkaBus); ok {
			compactedViewEqualsList(t, kb, ns, podKind, true, in)
		}
	})
}

// Issue 14, acceptance 2: with BRIDGE_DROP_FIELDS=status an update that
// changes only the status of an object changes nothing of what is
// published, so it publishes nothing: 100 status-only updates of 10
// Deployments publish no message, and the 10 spec updates after them
// publish 10, none of which carries a status.
func TestViewDropFieldsSuppressesNoOpUpdates(t *testing.T) {
	const deployments, statusUpdates = 10, 100
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "view-drop")
		br := startBridge(t, viewEnv(b, ns, "deployments.apps", map[string]string{"BRIDGE_DROP_FIELDS": "status"}), nil)
		name := func(i int) string { return fmt.Sprintf("web-%d", i) }
		key := func(i int) string { return ns + "/" + name(i) }
		want := map[string][]string{}
		for i := range deployments {
			want[key(i)] = []string{"added@" + createDeployment(t, ns, name(i), nil)}
		}
		for i := range deployments {
			waitForChange(t, b, ns, deploymentKind, key(i), want[key(i)][0])
		}
		for u := range statusUpdates {
			setDeploymentStatus(t, ns, name(u%deployments), u/deployments)
		}
		// Each object's spec update follows its status updates on the bus,
		// so once it is there any message a status update made would be
		// there too.
		for i := range deployments {
			rv := changeDeployment(t, ns, name(i), func(d *appsv1.Deployment) { d.Spec.Replicas = int32Ptr(2) })
			want[key(i)] = append(want[key(i)], "updated@"+rv)
		}
		for i := range deployments {
			waitForChange(t, b, ns, deploymentKind, key(i), want[key(i)][1])
		}
		br.stop(t)

		msgs := b.readKinds(t, ns, []watchedKind{deploymentKind})
		if d := diffChanges(changesByKey(msgs), want); d != "" {
			t.Errorf("%d status-only updates and %d spec updates of %d Deployments: the events differ:\n%s", statusUpdates, deployments, deployments, d)
		}
		var withStatus []string
		for _, m := range msgs {
			if _, ok := publishedObject(t, m)["status"]; ok {
				withStatus = append(withStatus, m.Key()+"@"+m.ResourceVersion)
			}
		}
		if len(withStatus) > 0 {
			t.Errorf("%d of %d events carry the dropped status, the first %s", len(withStatus), len(msgs), withStatus[0])
		}
	})
}

// Issue 14, acceptance 3: the view holds across a restart. While the
// bridge is down, 5 Deployments leave the filter, 5 enter it, 5 change in
// published fields and 5 only in the dropped status; on its restart the
// bridge publishes exactly 15 events, all snapshot: 5 deleted with the
// reason left-filter, 5 added and 5 updated.
func TestViewRestartPublishesTheViewsChanges(t *testing.T) {
	const filter = `"view" in labels && labels["view"] == "in"`
	inLabels, outLabels := map[string]string{"view": "in"}, map[string]string{"view": "out"}
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "view-restart")
		env := viewEnv(b, ns, "deployments.apps", map[string]string{"BRIDGE_FILTER": filter, "BRIDGE_DROP_FIELDS": "status"})
		key := func(name string) string { return ns + "/" + name }
		names := func(prefix string, n int) []string {
			var out []string
			for i := range n {
				out = append(out, fmt.Sprintf("%s-%d", prefix, i))
			}
			return out
		}
		leave, enter, spec, status := names("leave", 5), names("enter", 5), names("spec", 5), names("status", 5)
		still, out := names("still", 2), names("out", 2)

		inView := map[string]string{} // name → the added event the first run publishes
		for _, n := range slices.Concat(leave, spec, status, still) {
			inView[n] = "added@" + createDeployment(t, ns, n, inLabels)
		}
		for _, n := range slices.Concat(enter, out) {
			createDeployment(t, ns, n, outLabels)
		}
		br := startBridge(t, env, nil)
		for n, c := range inView {
			waitForChange(t, b, ns, deploymentKind, key(n), c)
		}
		br.stop(t)
		before := b.readKinds(t, ns, []watchedKind{deploymentKind})
		if d := diffChanges(changesByKey(before), func() map[string][]string {
			w := map[string][]string{}
			for n, c := range inView {
				w[key(n)] = []string{c}
			}
			return w
		}()); d != "" {
			t.Fatalf("the first run's events differ:\n%s", d)
		}

		// While the bridge is down.
		want := map[string][]string{}
		for _, n := range leave {
			changeDeployment(t, ns, n, func(d *appsv1.Deployment) { d.Labels = outLabels })
			want[key(n)] = []string{"deleted(" + leftFilter + ")"}
		}
		for _, n := range enter {
			want[key(n)] = []string{"added@" + changeDeployment(t, ns, n, func(d *appsv1.Deployment) { d.Labels = inLabels })}
		}
		for _, n := range spec {
			want[key(n)] = []string{"updated@" + changeDeployment(t, ns, n, func(d *appsv1.Deployment) { d.Spec.Replicas = int32Ptr(3) })}
		}
		for _, n := range status {
			setDeploymentStatus(t, ns, n, 1)
		}
		setDeploymentStatus(t, ns, out[0], 1) // out of the view, and only its status

		// Ready once the restart's comparison is published.
		br = startBridge(t, env, nil)
		br.stop(t)
		after := newSince(before, b.readKinds(t, ns, []watchedKind{deploymentKind}))
		if len(after) != 15 {
			t.Errorf("the restart published %d events, want 15", len(after))
		}
		if d := diffChanges(changesByKey(after), want); d != "" {
			t.Errorf("the restart's events differ:\n%s", d)
		}
		for _, m := range after {
			if !m.Snapshot {
				t.Errorf("%s: the restart's %s event is not marked snapshot", m.Key(), m.Action)
			}
			if m.Action != "deleted" {
				if _, ok := publishedObject(t, m)["status"]; ok {
					t.Errorf("%s: the %s event carries the dropped status", m.Key(), m.Action)
				}
			}
		}
		if kb, ok := b.(*kafkaBus); ok {
			compactedViewEqualsList(t, kb, ns, deploymentKind, false, func(o *unstructured.Unstructured) bool {
				return o.GetLabels()["view"] == "in"
			})
		}
	})
}

// Issue 14, acceptance 4: changing the view's definition between runs is a
// change of the view, which the first run with the new definition
// publishes as a snapshot and nothing else. A narrower filter publishes
// exactly the objects no longer in it as deleted, with the reason
// left-filter; the same definition again publishes nothing; the wider
// filter again adds those objects back; a projection added publishes
// every object in the view again, projected.
func TestViewDefinitionChange(t *testing.T) {
	const (
		wide   = `"size" in labels`
		narrow = `"size" in labels && labels["size"] == "large"`
	)
	forEachBus(t, func(t *testing.T, b bus) {
		ns := namespace(t, "view-def")
		cms := kube(t).CoreV1().ConfigMaps(ns)
		rvs := map[string]string{} // key → resourceVersion
		var small, large []string  // keys
		for i, size := range []string{"small", "large", "small", "small", "large", "small", "large", "small", "large", "small", "", ""} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": fmt.Sprint(i)}}
			if size != "" {
				cm.Labels = map[string]string{"size": size}
			}
			cm, err := cms.Create(t.Context(), cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			k := ns + "/" + cm.Name
			rvs[k] = cm.ResourceVersion
			switch size {
			case "small":
				small = append(small, k)
			case "large":
				large = append(large, k)
			}
		}
		// run starts the bridge with the view's settings, and returns the
		// events it published by the time it was ready (the comparison of
		// the initial list with the checkpoint), once it stopped.
		var seen []*wire.Message
		run := func(settings map[string]string) []*wire.Message {
			t.Helper()
			startBridge(t, viewEnv(b, ns, "configmaps", settings), nil).stop(t)
			all := b.read(t, ns)
			out := newSince(seen, all)
			seen = all
			return out
		}
		expect := func(what string, got []*wire.Message, keys []string, c func(key string) string) {
			t.Helper()
			want := map[string][]string{}
			for _, k := range keys {
				want[k] = []string{c(k)}
			}
			if d := diffChanges(datedChanges(got, rvs), want); d != "" {
				t.Errorf("%s: the events differ:\n%s", what, d)
			}
			for _, m := range got {
				if !m.Snapshot {
					t.Errorf("%s: %s: the %s event is not marked snapshot", what, m.Key(), m.Action)
				}
			}
		}
		added := func(k string) string { return "added@" + rvs[k] }

		expect("first run, filter "+wide, run(map[string]string{"BRIDGE_FILTER": wide}), slices.Concat(small, large), added)
		expect("filter narrowed to "+narrow, run(map[string]string{"BRIDGE_FILTER": narrow}), small,
			func(string) string { return "deleted(" + leftFilter + ")" })
		expect("the narrow filter again", run(map[string]string{"BRIDGE_FILTER": narrow}), nil, nil)
		// The objects did not change since they left the view: the view
		// did, and their events are dated by a later revision, so that a
		// consumer that saw them leave takes them back (and JetStream
		// does not take them for repeats of their first events).
		expect("filter widened back to "+wide, run(map[string]string{"BRIDGE_FILTER": wide}), small,
			func(string) string { return "added@" + datedRV })
		got := run(map[string]string{"BRIDGE_FILTER": wide, "BRIDGE_DROP_FIELDS": "data"})
		expect("BRIDGE_DROP_FIELDS=data added", got, slices.Concat(small, large), func(k string) string { return "updated@" + datedRV })
		for _, m := range got {
			if _, ok := publishedObject(t, m)["data"]; ok {
				t.Errorf("%s: the %s event carries the dropped data", m.Key(), m.Action)
			}
		}
		if kb, ok := b.(*kafkaBus); ok {
			compactedViewEqualsList(t, kb, ns, configMaps, true, func(o *unstructured.Unstructured) bool {
				return o.GetLabels()["size"] != ""
			})
		}
	})
}

// Issue 14, acceptance 5: a filter that does not compile, one that is not
// bool, an unknown variable, a bad field path, and the view combined with
// BRIDGE_OLD_OBJECT each make the bridge exit with code 2 and a message
// that names the setting and, for expressions and paths, the position at
// fault. A filter that fails at runtime on some objects (a ConfigMap has
// no spec) counts them in bridge_filter_errors_total{resource} and leaves
// them out, while the objects it matches flow.
func TestViewBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string // regular expressions the output must match
	}{
		{"syntax error", []string{`BRIDGE_FILTER=object.status.phase !~ "Running"`},
			[]string{`BRIDGE_FILTER\b.*\b1:21\b`, `Syntax error`}},
		{"unbalanced parenthesis", []string{`BRIDGE_FILTER=resource == "pods" && (object.status.phase != "Running"`},
			[]string{`BRIDGE_FILTER\b.*\b1:56\b`}},
		{"unknown variable", []string{`BRIDGE_FILTER=resource != "pods" || objekt.status.phase != "Running"`},
			[]string{`BRIDGE_FILTER\b.*\b1:23\b`, `objekt`}},
		{"not bool", []string{`BRIDGE_FILTER=name`},
			[]string{`BRIDGE_FILTER`, `bool`}},
		{"not bool either", []string{`BRIDGE_FILTER=labels`},
			[]string{`BRIDGE_FILTER`, `bool`}},
		{"bad step in a dropped path", []string{`BRIDGE_DROP_FIELDS=status,spec.1abc`},
			[]string{`BRIDGE_DROP_FIELDS: position 1[12]\b`}},
		{"unterminated key in a kept path", []string{`BRIDGE_FIELDS=spec,metadata.annotations["kubectl.kubernetes.io/last-applied-configuration`},
			[]string{`BRIDGE_FIELDS: position \d+`}},
		{"list index in a kept path", []string{`BRIDGE_FIELDS=spec.containers[0].image`},
			[]string{`BRIDGE_FIELDS: position 1[56]\b`}},
		{"identity dropped", []string{`BRIDGE_DROP_FIELDS=status,metadata.name`},
			[]string{`BRIDGE_DROP_FIELDS`, `metadata\.name`}},
		{"with the old object", []string{`BRIDGE_FILTER=true`, `BRIDGE_OLD_OBJECT=true`},
			[]string{`BRIDGE_OLD_OBJECT`, `BRIDGE_FILTER`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runToExit(t, append([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_CHECKPOINT=none"}, tc.env...))
			if code != 2 {
				t.Fatalf("exit code %d, want 2; output:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("output does not match %s:\n%s", w, out)
				}
			}
			if strings.Contains(out, "panic") {
				t.Errorf("output mentions a panic:\n%s", out)
			}
		})
	}

	t.Run("runtime errors", func(t *testing.T) {
		const secret = "s3cr3t-do-not-log"
		ns := namespace(t, "view-errors")
		ctx := t.Context()
		cms := kube(t).CoreV1().ConfigMaps(ns)
		newCM := func(name string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"password": secret}}
		}
		// Listed at the start.
		if _, err := cms.Create(ctx, newCM("listed"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m := metrics.New()
		s := &sinktest.Recorder{}
		br := startBridgeWith(t, map[string]string{
			"BRIDGE_RESOURCES":  "configmaps,deployments.apps",
			"BRIDGE_NAMESPACES": ns,
			"BRIDGE_FILTER":     "object.spec.replicas > 1",
		}, bridge.WithSink(s), bridge.WithMetrics(m))
		// Watched: ConfigMaps the filter fails on, then Deployments it
		// matches or not.
		for i := range 3 {
			if _, err := cms.Create(ctx, newCM(fmt.Sprintf("watched-%d", i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		poll.Until(t, 30*time.Second, func() (bool, string) {
			n := seriesOf(t, m, "bridge_filter_errors_total", "resource")["configmaps"]
			return n >= 4, fmt.Sprintf(`bridge_filter_errors_total{resource="configmaps"} = %v, want ≥ 4`, n)
		})
		var want []string
		for i := range 4 {
			name := fmt.Sprintf("web-%d", i)
			createDeployment(t, ns, name, nil) // one replica: not in the view
			if i%2 == 0 {
				changeDeployment(t, ns, name, func(d *appsv1.Deployment) { d.Spec.Replicas = int32Ptr(3) })
				want = append(want, "Deployment "+ns+"/"+name)
			}
		}
		poll.Until(t, 30*time.Second, func() (bool, string) {
			return s.Len() >= len(want), fmt.Sprintf("%d of %d events", s.Len(), len(want))
		})
		br.stop(t)

		var got []string
		for _, msg := range s.Accepted() {
			got = append(got, msg.Kind+" "+msg.Key())
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("events about %v, want %v", got, want)
		}
		if n := seriesOf(t, m, "bridge_filter_errors_total", "resource")["deployments.apps"]; n != 0 {
			t.Errorf(`bridge_filter_errors_total{resource="deployments.apps"} = %v, want 0: every Deployment has a spec`, n)
		}
		logs := br.logs.String()
		if strings.Contains(logs, secret) {
			t.Errorf("the logs hold an object's data:\n%s", logs)
		}
		named := false
		for line := range strings.Lines(logs) {
			named = named || strings.Contains(line, ns+"/") && strings.Contains(line, "spec")
		}
		if !named {
			t.Errorf("no log line names an object the filter failed on and what it lacks:\n%s", logs)
		}
	})
}
