package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// The kinds the view tests watch besides ConfigMaps.
var (
	podKind        = watchedKind{kind: "Pod", gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
	deploymentKind = watchedKind{kind: "Deployment", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}
)

// leftFilter is the reason attribute of the deleted event of an object
// that left the view's filter.
const leftFilter = "left-filter"

// viewEnv configures a bridge for b that watches resources in ns, with
// extra (the view's settings) on top.
func viewEnv(b bus, ns, resources string, extra map[string]string) map[string]string {
	env := b.env(ns)
	env["BRIDGE_RESOURCES"] = resources
	maps.Copy(env, extra)
	return env
}

// reasonOf is the event's reason attribute: "left-filter" for the deleted
// event of an object that left the view, "" otherwise.
func reasonOf(m *wire.Message) string { return m.Reason }

// viewChange is one event as the view tests expect it: "added@<rv>",
// "updated@<rv>", or "deleted" with its reason ("deleted(left-filter)"),
// whose resourceVersion the tests leave open.
func viewChange(m *wire.Message) string {
	if m.Action == "deleted" {
		if r := reasonOf(m); r != "" {
			return "deleted(" + r + ")"
		}
		return "deleted"
	}
	return m.Action + "@" + m.ResourceVersion
}

// changesByKey is each object's events, as viewChange writes them, in order.
func changesByKey(msgs []*wire.Message) map[string][]string {
	out := map[string][]string{}
	for _, m := range msgs {
		out[m.Key()] = append(out[m.Key()], viewChange(m))
	}
	return out
}

// datedRV stands, in datedChanges, for a resourceVersion later than the
// object's own.
const datedRV = "later"

// datedChanges is changesByKey, with each resourceVersion later than the
// one rvs holds for the object (key → resourceVersion) written datedRV,
// and each one that is not a number left as it is.
func datedChanges(msgs []*wire.Message, rvs map[string]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range msgs {
		c := viewChange(m)
		if own, ok := rvs[m.Key()]; ok && m.Action != "deleted" {
			x, err1 := strconv.ParseUint(m.ResourceVersion, 10, 64)
			y, err2 := strconv.ParseUint(own, 10, 64)
			if err1 == nil && err2 == nil && x > y {
				c = m.Action + "@" + datedRV
			}
		}
		out[m.Key()] = append(out[m.Key()], c)
	}
	return out
}

// diffChanges says how got differs from want, per object; "" when they
// are equal. Objects want lacks must have no events.
func diffChanges(got, want map[string][]string) string {
	var diffs []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[key], want[key]) {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", key, got[key], want[key]))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[key]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want no event", key, got[key]))
		}
	}
	return strings.Join(diffs, "\n")
}

// newSince is what msgs holds beyond before: each event of before, by id,
// taken out once.
func newSince(before, msgs []*wire.Message) []*wire.Message {
	seen := map[string]int{}
	for _, m := range before {
		seen[m.ID]++
	}
	var out []*wire.Message
	for _, m := range msgs {
		if seen[m.ID] > 0 {
			seen[m.ID]--
			continue
		}
		out = append(out, m)
	}
	return out
}

// waitForChange waits until b holds the event of the object key of kind
// that want (as viewChange writes it) describes.
func waitForChange(t *testing.T, b bus, ns string, kind watchedKind, key, want string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		got := changesByKey(b.readKinds(t, ns, []watchedKind{kind}))[key]
		return slices.Contains(got, want), fmt.Sprintf("%s: %v, waiting for %s", key, got, want)
	})
}

// publishedObject is the object an event carries (data.object).
func publishedObject(t *testing.T, m *wire.Message) map[string]any {
	t.Helper()
	var data struct {
		Object map[string]any `json:"object"`
	}
	if err := json.Unmarshal(m.Data, &data); err != nil {
		t.Fatalf("event %s of %s: data: %v", m.ID, m.Key(), err)
	}
	return data.Object
}

// newPod is a Pod the API server takes; with no kubelet it stays as the
// tests set its status.
func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

// createPod creates a Pod, Pending as the API server makes every new Pod,
// and returns its resourceVersion.
func createPod(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := kube(t).CoreV1().Pods(ns).Create(t.Context(), newPod(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod %s/%s created in phase %q, want Pending", ns, name, p.Status.Phase)
	}
	return p.ResourceVersion
}

// setPodPhase moves a Pod to phase through the status subresource, as a
// kubelet does, and returns its new resourceVersion.
func setPodPhase(t *testing.T, ns, name string, phase corev1.PodPhase) string {
	t.Helper()
	pods := kube(t).CoreV1().Pods(ns)
	p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	p, err = pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("pod %s/%s to %s: %v", ns, name, phase, err)
	}
	if p.Status.Phase != phase {
		t.Fatalf("pod %s/%s: phase %q after the update to %s", ns, name, p.Status.Phase, phase)
	}
	return p.ResourceVersion
}

// createDeployment creates a Deployment of one replica with labels and
// returns its resourceVersion.
func createDeployment(t *testing.T, ns, name string, labels map[string]string) string {
	t.Helper()
	d := deployment(name)
	d.Labels = labels
	d, err := kube(t).AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.ResourceVersion
}

// changeDeployment applies edit to a Deployment (its metadata and spec)
// and returns its new resourceVersion.
func changeDeployment(t *testing.T, ns, name string, edit func(*appsv1.Deployment)) string {
	t.Helper()
	deps := kube(t).AppsV1().Deployments(ns)
	d, err := deps.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit(d)
	d, err = deps.Update(t.Context(), d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update deployment %s/%s: %v", ns, name, err)
	}
	return d.ResourceVersion
}

// setDeploymentStatus writes status generation gen of a Deployment
// through the status subresource, as its controller does, and returns its
// new resourceVersion. Every generation differs from the one before.
func setDeploymentStatus(t *testing.T, ns, name string, gen int) string {
	t.Helper()
	deps := kube(t).AppsV1().Deployments(ns)
	d, err := deps.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := int32(gen%3 + 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
			Reason: "NewReplicaSetAvailable", Message: fmt.Sprintf("status generation %d", gen),
		}},
	}
	before := d.ResourceVersion
	d, err = deps.UpdateStatus(t.Context(), d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status of deployment %s/%s: %v", ns, name, err)
	}
	if d.ResourceVersion == before {
		t.Fatalf("status of deployment %s/%s: generation %d changed nothing", ns, name, gen)
	}
	return d.ResourceVersion
}

// compactedViewEqualsList compacts the Kafka topic of kind in ns, reads it
// from its start as a consumer would (tombstones and deleted events remove
// their objects) and checks that it holds exactly the objects of the API
// server's LIST that in selects, each with its uid and, with atRV, at its
// resourceVersion. A view that drops fields leaves out the changes of
// only those, so its objects may be at an older resourceVersion.
func compactedViewEqualsList(t *testing.T, kb *kafkaBus, ns string, kind watchedKind, atRV bool, in func(*unstructured.Unstructured) bool) {
	t.Helper()
	kb.c.Compact()
	st := stateOf(t, kb.c, kafkaTopic(ns, kind))
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	list, err := dyn.Resource(kind.gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]liveObject{}
	for i := range list.Items {
		o := &list.Items[i]
		if in(o) {
			want[ns+"/"+o.GetName()] = liveObject{uid: string(o.GetUID()), rv: o.GetResourceVersion()}
		}
	}
	var diffs []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		got, ok := st.live[key]
		switch {
		case !ok:
			diffs = append(diffs, key+" missing")
		case got.uid != want[key].uid || (atRV && got.rv != want[key].rv):
			diffs = append(diffs, fmt.Sprintf("%s at uid %s rv %s, want uid %s rv %s", key, got.uid, got.rv, want[key].uid, want[key].rv))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(st.live)) {
		if _, ok := want[key]; !ok {
			diffs = append(diffs, key+" is not in the filtered LIST")
		}
	}
	if len(diffs) > 0 {
		t.Errorf("the compacted topic %s differs from the filtered LIST:\n%s", kafkaTopic(ns, kind), strings.Join(diffs, "\n"))
	}
}
