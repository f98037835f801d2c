package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// apfKind is a namespaced resource the throttling test fills and watches.
type apfKind struct {
	gvr schema.GroupVersionResource
	// name is how BRIDGE_RESOURCES names it.
	name string
	kind string
	// content is an object's content besides its metadata.
	content func(name string) map[string]any
}

// apfKinds are ten built-in namespaced resources that need no controller:
// a bridge that watches them starts ten reflectors at once.
var apfKinds = []apfKind{
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "configmaps", "ConfigMap", func(string) map[string]any {
		return map[string]any{"data": map[string]any{"payload": strings.Repeat("c", 2048)}}
	}},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "secrets", "Secret", func(string) map[string]any {
		return map[string]any{"stringData": map[string]any{"payload": strings.Repeat("s", 2048)}}
	}},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "serviceaccounts", "ServiceAccount", func(string) map[string]any {
		return map[string]any{}
	}},
	{schema.GroupVersionResource{Version: "v1", Resource: "podtemplates"}, "podtemplates", "PodTemplate", func(string) map[string]any {
		return map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}}
	}},
	{schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}, "limitranges", "LimitRange", func(string) map[string]any {
		return map[string]any{"spec": map[string]any{"limits": []any{map[string]any{"type": "Container", "max": map[string]any{"cpu": "1"}}}}}
	}},
	{schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, "resourcequotas", "ResourceQuota", func(string) map[string]any {
		return map[string]any{"spec": map[string]any{"hard": map[string]any{"pods": "10"}}}
	}},
	{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "leases.coordination.k8s.io", "Lease", func(name string) map[string]any {
		return map[string]any{"spec": map[string]any{"holderIdentity": name}}
	}},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, "roles.rbac.authorization.k8s.io", "Role", func(string) map[string]any {
		return map[string]any{"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}}}
	}},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}, "controllerrevisions.apps", "ControllerRevision", func(name string) map[string]any {
		return map[string]any{"revision": int64(1), "data": map[string]any{"name": name}}
	}},
	{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, "networkpolicies.networking.k8s.io", "NetworkPolicy", func(string) map[string]any {
		return map[string]any{"spec": map[string]any{"podSelector": map[string]any{}}}
	}},
}

// Issue 15, acceptance 4: the API server's Priority and Fairness is tuned
// very low for the bridge's user (a priority level of the least
// concurrency it can have, no borrowing, refusals rather than queues), and
// the bridge starts over ten resources at once. It is refused (429), it
// retries, and it converges: it becomes ready, what it published equals
// a LIST of every resource, bridge_api_throttled_total counts the
// refusals, the throttling is logged at most once per resource, and the
// process never exits.
func TestThrottledByPriorityAndFairness(t *testing.T) {
	const perKind = 40
	// Two namespaces: twenty reflectors start at once, on a priority
	// level of three seats.
	nss := []string{namespace(t, "apf"), namespace(t, "apf")}
	user := "bridge-" + nss[0]
	for _, ns := range nss {
		grantAll(t, ns, user)
		fill(t, ns, perKind)
	}

	fs := throttleUser(t, user)
	kubeconfig := impersonatingKubeconfig(t, user)
	// Requests as the user are classified by the new flow schema once the
	// API server has taken it in.
	waitClassified(t, user, nss[0], fs)

	names := make([]string, len(apfKinds))
	for i, k := range apfKinds {
		names[i] = k.name
	}
	out := filepath.Join(t.TempDir(), "events")
	start := time.Now()
	p := launchProc(t, []string{"KUBECONFIG=" + kubeconfig, "BRIDGE_RESOURCES=" + strings.Join(names, ","),
		"BRIDGE_NAMESPACES=" + strings.Join(nss, ","), "BRIDGE_CHECKPOINT=none"}, out, "ready", "")
	// Each refusal's Retry-After grows while the API server keeps
	// refusing (from 1s, doubling up to 32s): a throttled start is slow.
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("the bridge exited:\n%s", p.logText())
	case <-time.After(3 * time.Minute):
		t.Fatalf("the bridge not ready after 3m:\n%s", p.logText())
	}
	ready := time.Since(start)
	addr := p.httpAddr(t)

	poll.Until(t, time.Minute, func() (bool, string) {
		return sameAsLists(t, nss, readEvents(t, out))
	})
	converged := time.Since(start)

	s, ok := scrape(addr)
	if !ok {
		t.Fatalf("the bridge does not serve /metrics:\n%s", p.logText())
	}
	throttled := s.Sum("bridge_api_throttled_total")
	byVerb := map[string]float64{}
	if f := s["bridge_api_throttled_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "verb":
					byVerb[l.GetValue()] += m.GetCounter().GetValue()
				case l.GetName() == "resource" && !slices.Contains(names, l.GetValue()):
					t.Errorf("bridge_api_throttled_total has a series for resource %q, which the bridge does not watch", l.GetValue())
				}
			}
		}
	}
	if throttled == 0 {
		t.Errorf("bridge_api_throttled_total is 0: the API server never refused the bridge, so the test proves nothing")
	}
	select {
	case <-p.done:
		t.Fatalf("the bridge exited:\n%s", p.logText())
	default:
	}
	logged := map[string]int{}
	for line := range strings.Lines(p.logText()) {
		if strings.Contains(line, "the API server throttles the bridge") {
			t.Log(strings.TrimSpace(line))
			for _, k := range apfKinds {
				if strings.Contains(line, `"resource":"`+k.name+`"`) {
					logged[k.name]++
				}
			}
		}
	}
	// Once per resource, and again at most once a minute.
	allowed := 1 + int(time.Since(start)/time.Minute)
	for name, n := range logged {
		if n > allowed {
			t.Errorf("throttling of %s logged %d times in %s, want at most %d", name, n, time.Since(start).Round(time.Second), allowed)
		}
	}
	if len(logged) == 0 && throttled > 0 {
		t.Errorf("the bridge was throttled %v times and never said so", throttled)
	}
	t.Logf("%d resources of %d objects in each of 2 namespaces: ready after %s, converged on LIST after %s; %v refusals (429) counted (%v), throttling logged for %d resources, start-up check retried %d times",
		len(apfKinds), perKind, ready.Round(time.Millisecond), converged.Round(time.Millisecond), throttled, byVerb, len(logged),
		strings.Count(p.logText(), "the start-up check was throttled"))
	if code := p.terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// grantAll lets user get, list and watch everything in ns.
func grantAll(t *testing.T, ns, user string) {
	t.Helper()
	rbac := kube(t).RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := rbac.Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := rbac.RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// apfDynamic is a dynamic client of the admin user, without client-side
// rate limiting; the admin is exempt from Priority and Fairness.
func apfDynamic(t *testing.T) *dynamic.DynamicClient {
	t.Helper()
	rc := cp.RESTConfig()
	rc.QPS = -1
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// fill creates n objects of each of apfKinds in ns, in parallel.
func fill(t *testing.T, ns string, n int) {
	t.Helper()
	dc := apfDynamic(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(apfKinds))
	for _, k := range apfKinds {
		wg.Go(func() {
			for i := range n {
				name := fmt.Sprintf("obj-%03d", i)
				obj := &unstructured.Unstructured{Object: k.content(name)}
				obj.SetAPIVersion(k.gvr.GroupVersion().String())
				obj.SetKind(k.kind)
				obj.SetName(name)
				if _, err := dc.Resource(k.gvr).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s %s: %w", k.name, name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// throttleUser classifies every request of user into a priority level of
// its own with the least concurrency the API server gives one (one
// nominal share: a few seats), no borrowing from other levels, and
// refusals (429) instead of queues, and returns the flow schema. Both are
// deleted when the test ends.
func throttleUser(t *testing.T, user string) *flowcontrolv1.FlowSchema {
	t.Helper()
	fc := kube(t).FlowcontrolV1()
	name := user
	plc := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: new(int32(1)),
				LendablePercent:          new(int32(0)),
				BorrowingLimitPercent:    new(int32(0)),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	if _, err := fc.PriorityLevelConfigurations().Create(t.Context(), plc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fc.PriorityLevelConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			// Ahead of every suggested flow schema but exempt (1) and
			// the system's own (below 1000).
			MatchingPrecedence:  500,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	created, err := fc.FlowSchemas().Create(t.Context(), fs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fc.FlowSchemas().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return created
}

// waitClassified waits until the API server classifies a request of user
// by fs, as the header X-Kubernetes-PF-FlowSchema-UID of its answer says.
func waitClassified(t *testing.T, user, ns string, fs *flowcontrolv1.FlowSchema) {
	t.Helper()
	rc := cp.RESTConfig()
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	url := rc.Host + "/api/v1/namespaces/" + ns + "/configmaps?limit=1"
	poll.Until(t, 30*time.Second, func() (bool, string) {
		resp, err := hc.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
		return resp.StatusCode == http.StatusOK && got == string(fs.UID),
			fmt.Sprintf("answer %d classified by flow schema %q, want %q (%s)", resp.StatusCode, got, fs.UID, fs.Name)
	})
}

// sameAsLists compares the latest state msgs give each object with a LIST
// of every resource of apfKinds in each of nss (same keys, same
// resourceVersions).
func sameAsLists(t *testing.T, nss []string, msgs []*wire.Message) (bool, string) {
	view := map[string]string{}
	for _, m := range msgs {
		key := m.Resource.Resource + " " + m.Key()
		if m.Action == "deleted" {
			delete(view, key)
		} else {
			view[key] = m.ResourceVersion
		}
	}
	dc := apfDynamic(t)
	total := 0
	for _, ns := range nss {
		for _, k := range apfKinds {
			list, err := dc.Resource(k.gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			total += len(list.Items)
			for _, o := range list.Items {
				key := k.gvr.Resource + " " + ns + "/" + o.GetName()
				if view[key] != o.GetResourceVersion() {
					return false, fmt.Sprintf("%s: published at %q, the API server at %s (%d events so far)", key, view[key], o.GetResourceVersion(), len(msgs))
				}
			}
		}
	}
	if total != len(view) {
		return false, fmt.Sprintf("published %d objects, the API server lists %d", len(view), total)
	}
	return true, ""
}
