package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/poll"
)

// The namespaces that the lifecycle's first release watches in turn.
const (
	lifeA = "life-a"
	lifeB = "life-b"
)

// rbacDelay bounds how long an RBAC change takes to reach the API
// server's authorizer, which reads Roles and bindings through informers.
// It is usually a few milliseconds.
const rbacDelay = 30 * time.Second

// lifeState is one revision of a release: its values, and what they must
// let the ServiceAccount do.
type lifeState struct {
	name   string
	values string
	grants grants
}

// lifeRelease is a release of the lifecycle, with the values of its
// revisions.
type lifeRelease struct {
	release, namespace string
	states             []lifeState
}

func (r lifeRelease) fullname() string { return r.release + "-bridge" }

// valuesFile writes the values of state to a file for helm's -f.
func valuesFile(t *testing.T, state lifeState) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), state.name+"-values.yaml")
	if err := os.WriteFile(path, []byte(state.values), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkLifecycle installs, upgrades, rolls back and uninstalls the chart on
// the API server with helm, for real (no controller-manager runs, so the
// Deployment never has pods). After each step the objects of the release
// are exactly what its revision renders, and the ServiceAccount's token may
// list and watch exactly what that revision grants. helm uninstall then
// leaves nothing of the release: no object of any kind the chart renders,
// found by the release's labels or by name, and no release record. The
// checkpoint's PersistentVolumeClaim is deleted with the rest, unless its
// annotations ask helm to keep it.
func checkLifecycle(t *testing.T, c *cluster, kubeconfig string) {
	life := lifeRelease{release: "life", namespace: "life-system", states: []lifeState{
		{
			// The chart's defaults: a file checkpoint on a claim, the metrics
			// Service; a Role in one namespace.
			name: "one",
			values: `
watch:
  resources: [configmaps]
  namespaces: [` + lifeA + `]
`,
			grants: grants{namespaced: set(configmaps), namespaces: []string{lifeA}},
		},
		{
			// Another resource, in another namespace, and a cluster-scoped
			// one: the Roles move, a ClusterRole comes; and a ServiceMonitor,
			// the Grafana dashboard and the alerts.
			name: "two",
			values: `
watch:
  resources: [deployments.apps]
  clusterResources: [nodes]
  namespaces: [` + lifeB + `]
metrics:
  serviceMonitor:
    enabled: true
grafanaDashboard:
  enabled: true
prometheusRule:
  enabled: true
`,
			grants: grants{namespaced: set(deployments), cluster: set(nodes), namespaces: []string{lifeB}},
		},
	}}
	// What a file checkpoint cannot have: two replicas, so leader election,
	// a PodDisruptionBudget and a RollingUpdate, with the checkpoint in
	// NATS; then one replica, so none of them, and a Recreate.
	haValues := `
watch:
  resources: [configmaps, deployments.apps]
sink: nats
checkpoint:
  type: nats-kv
nats:
  urls: [nats://nats.messaging.svc:4222]
metrics:
  serviceMonitor:
    enabled: true
`
	// The replica comes with the first revision and goes with the second.
	replicaValues := `
replica:
  enabled: true
  tokens:
    existingSecret: replica-tokens
  rules:
    grants:
      - subjects: [{kind: Group, name: sre}]
        clusters: ["*"]
        rules: [{apiGroups: [""], resources: [configmaps], verbs: [list]}]
`
	ha := lifeRelease{release: "life-ha", namespace: "life-ha-system", states: []lifeState{
		{
			name:   "ha",
			values: haValues + replicaValues + "replicaCount: 2\n",
			grants: grants{namespaced: set(configmaps, deployments), lease: "life-ha-bridge", leaseNamespace: "life-ha-system"},
		},
		{
			name:   "ha-single",
			values: haValues + "replicaCount: 1\n",
			grants: grants{namespaced: set(configmaps, deployments)},
		},
	}}
	// The chart's defaults, with the annotation that tells helm to keep the
	// checkpoint's claim.
	keep := lifeRelease{release: "life-keep", namespace: "life-keep-system", states: []lifeState{{
		name: "keep",
		values: `
checkpoint:
  file:
    persistence:
      annotations:
        helm.sh/resource-policy: keep
`,
		grants: grants{namespaced: set(configmaps)},
	}}}

	// A watched namespace that does not exist.
	lost := lifeRelease{release: "life-lost", namespace: "life-lost-system", states: []lifeState{{
		name: "lost",
		values: `
watch:
  namespaces: [life-missing]
`,
	}}}

	c.createNamespaces(t, life.namespace, ha.namespace, keep.namespace, lost.namespace, lifeA, lifeB)
	l := newLifecycle(t, c, kubeconfig, life, ha, keep, lost)

	// The releases are independent of each other: each runs its course
	// beside the others.
	t.Run(life.release, func(t *testing.T) {
		t.Parallel()
		l := l.on(t)
		l.install(life, "helm uninstall deletes the claim, and the checkpoint with it")
		token := c.tokenConfig(t, life.namespace, life.fullname())
		l.holds(life, life.states[0], token)

		// The claim's access modes are fixed once it exists: the API server
		// refuses the upgrade, helm names the claim, and the release stays
		// as it was.
		_, err := runHelm(t, "upgrade", life.release, chartDir, "-n", life.namespace, "-f", l.files["one"],
			"--set", "checkpoint.file.persistence.accessModes={ReadWriteOncePod}", "--kubeconfig", kubeconfig)
		if want := `PersistentVolumeClaim "life-bridge-checkpoint" is invalid: spec: Forbidden: spec is immutable`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("helm upgrade with the claim's access modes changed: %v, want an error with %q", err, want)
		}
		l.holds(life, life.states[0], token)

		l.helm("upgrade", life.release, chartDir, "-n", life.namespace, "-f", l.files["two"])
		l.holds(life, life.states[1], token)

		l.helm("rollback", life.release, "1", "-n", life.namespace)
		l.holds(life, life.states[0], token)
		checkHistory(t, l.helm("history", life.release, "-n", life.namespace, "-o", "json"),
			"1 superseded Install complete", `2 failed Upgrade "life" failed: cannot patch "life-bridge-checkpoint"`,
			"3 superseded Upgrade complete", "4 deployed Rollback to 1")
		if got := c.releaseRecords(t, life.namespace, life.release); len(got) != 4 {
			t.Errorf("helm's records of %s: %v, want one for each of 4 revisions", life.release, got)
		}

		l.helm("uninstall", life.release, "-n", life.namespace)
		l.checkGone(life, nil)
	})
	t.Run(ha.release, func(t *testing.T) {
		t.Parallel()
		l := l.on(t)
		l.install(ha, "")
		token := c.tokenConfig(t, ha.namespace, ha.fullname())
		l.holds(ha, ha.states[0], token)
		// The Deployment's strategy goes from RollingUpdate to Recreate.
		l.helm("upgrade", ha.release, chartDir, "-n", ha.namespace, "-f", l.files["ha-single"])
		l.holds(ha, ha.states[1], token)
		l.helm("uninstall", ha.release, "-n", ha.namespace)
		l.checkGone(ha, nil)
	})
	t.Run(keep.release, func(t *testing.T) {
		t.Parallel()
		l := l.on(t)
		l.install(keep, "helm uninstall keeps the claim, and an install of life-keep in life-keep-system takes it over")
		l.holds(keep, keep.states[0], c.tokenConfig(t, keep.namespace, keep.fullname()))
		claim := l.checkKeptClaim(keep)
		l.checkGone(keep, &claim)
	})
	t.Run(lost.release, func(t *testing.T) {
		t.Parallel()
		l := l.on(t)
		// The API server refuses the Role in the missing namespace: helm
		// install fails naming it, after creating what it could, and helm
		// uninstall removes that.
		_, err := runHelm(t, "install", lost.release, chartDir, "-n", lost.namespace, "-f", l.files["lost"], "--kubeconfig", kubeconfig)
		if want := `namespaces "life-missing" not found`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("helm install with a watched namespace that does not exist: %v, want an error with %q", err, want)
		}
		l.helm("uninstall", lost.release, "-n", lost.namespace)
		l.checkGone(lost, nil)
	})
}

// lifecycle runs helm on one API server for releases whose revisions it
// has rendered.
type lifecycle struct {
	t          *testing.T
	c          *cluster
	kubeconfig string
	files      map[string]string  // each state's values file
	renders    map[string]sourced // what each state renders
	kinds      map[schema.GroupKind]chartKind
}

// newLifecycle writes and renders every state of the releases, and finds
// the kinds they render between them (every kind the chart can render).
func newLifecycle(t *testing.T, c *cluster, kubeconfig string, releases ...lifeRelease) *lifecycle {
	t.Helper()
	l := &lifecycle{t: t, c: c, kubeconfig: kubeconfig, files: map[string]string{}, renders: map[string]sourced{}}
	var all []sourced
	for _, r := range releases {
		for _, s := range r.states {
			l.files[s.name] = valuesFile(t, s)
			l.renders[s.name] = renderSourced(t, r.release, r.namespace, l.files[s.name])
			all = append(all, l.renders[s.name])
		}
	}
	l.kinds = c.chartKinds(t, all...)
	return l
}

// helm runs helm against the API server and returns its output; an error
// fails the test.
func (l *lifecycle) helm(args ...string) string {
	l.t.Helper()
	out, err := runHelm(l.t, append(args, "--kubeconfig", l.kubeconfig)...)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

// on is l for the test t.
func (l *lifecycle) on(t *testing.T) *lifecycle {
	cp := *l
	cp.t = t
	return &cp
}

// install installs r at its first state. Its NOTES must say claim of what
// helm uninstall does with the checkpoint's claim; "" is that there is none,
// and they must not speak of it.
func (l *lifecycle) install(r lifeRelease, claim string) {
	t := l.t
	t.Helper()
	out := l.helm("install", r.release, chartDir, "-n", r.namespace, "-f", l.files[r.states[0].name])
	_, notes, _ := strings.Cut(out, "NOTES:\n")
	switch {
	case claim == "" && strings.Contains(notes, "helm uninstall"):
		t.Errorf("helm install %s: the NOTES speak of a claim there is not:\n%s", r.release, notes)
	case !strings.Contains(notes, claim):
		t.Errorf("helm install %s: the NOTES should say %q:\n%s", r.release, claim, notes)
	}
}

// holds checks that the release's objects are exactly what state renders,
// and that its token may do exactly what state grants.
func (l *lifecycle) holds(r lifeRelease, state lifeState, token *rest.Config) {
	t := l.t
	t.Helper()
	want := refsOf(l.renders[state.name].all())
	if diff := refDiff(want, l.c.byLabels(t, l.kinds, r.release)); diff != "" {
		t.Errorf("%s at %s: the objects with its labels are not what it renders:\n%s", r.release, state.name, diff)
	}
	if got := l.c.byName(t, l.kinds, want); len(got) != len(want) {
		t.Errorf("%s at %s: %d of the %d objects it renders found by name", r.release, state.name, len(got), len(want))
	}
	l.checkStrategy(state)
	awaitGrants(t, l.c, token, r, state)
}

// checkStrategy checks that the Deployment's strategy is what state
// renders: helm's patch leaves nothing of another revision's.
func (l *lifecycle) checkStrategy(state lifeState) {
	t := l.t
	t.Helper()
	d := only(l.renders[state.name].all(), "Deployment")[0]
	want, _, _ := unstructured.NestedMap(d.Object, "spec", "strategy")
	live, err := l.c.cs.AppsV1().Deployments(d.GetNamespace()).Get(t.Context(), d.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&live.Spec.Strategy)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := jsonOf(got), jsonOf(want); g != w {
		t.Errorf("%s at %s: the Deployment's strategy is %s, want %s", d.GetName(), state.name, g, w)
	}
}

// checkKeptClaim uninstalls r, whose checkpoint claim asks helm to keep
// it, installs it again and uninstalls it again: the claim, and the
// checkpoint on it, stays and is the next install's. It returns the claim.
func (l *lifecycle) checkKeptClaim(r lifeRelease) objectRef {
	t := l.t
	t.Helper()
	claim := objectRef{gk: schema.GroupKind{Kind: "PersistentVolumeClaim"}, namespace: r.namespace, name: r.fullname() + "-checkpoint"}
	claimUID := func() types.UID {
		t.Helper()
		pvc, err := l.c.cs.CoreV1().PersistentVolumeClaims(claim.namespace).Get(t.Context(), claim.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", claim, err)
		}
		return pvc.UID
	}
	uid := claimUID()
	uninstall := func() {
		t.Helper()
		out := l.helm("uninstall", r.release, "-n", r.namespace)
		if !strings.Contains(out, "kept due to the resource policy") || !strings.Contains(out, claim.name) {
			t.Errorf("helm uninstall %s does not say it kept %s:\n%s", r.release, claim, out)
		}
		if got := claimUID(); got != uid {
			t.Errorf("helm uninstall %s replaced %s (uid %s, was %s)", r.release, claim, got, uid)
		}
	}
	uninstall()
	l.helm("install", r.release, chartDir, "-n", r.namespace, "-f", l.files[r.states[0].name])
	if got := claimUID(); got != uid {
		t.Errorf("installed again, %s has a new %s (uid %s, was %s)", r.release, claim, got, uid)
	}
	l.holds(r, r.states[0], l.c.tokenConfig(t, r.namespace, r.fullname()))
	uninstall()
	return claim
}

// checkGone checks that nothing of r is left after helm uninstall: no
// object of a kind the chart renders with its labels, none that any of its
// revisions rendered by name, no release record. kept is the one object
// that must stay (nil: none), whole, not being deleted.
//
// A deleted claim waits for kube-controller-manager to see that no pod
// uses it before it goes; no controller-manager runs here, so such a claim
// counts as gone when there is no pod at all.
func (l *lifecycle) checkGone(r lifeRelease, kept *objectRef) {
	t := l.t
	t.Helper()
	var rendered []*unstructured.Unstructured
	for _, s := range r.states {
		rendered = append(rendered, l.renders[s.name].all()...)
	}
	pods, err := l.c.cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logged := map[objectRef]bool{}
	left := func(how string, fs []found) {
		t.Helper()
		for _, f := range fs {
			switch {
			case kept != nil && f.objectRef == *kept:
				if f.deleting {
					t.Errorf("helm uninstall %s: %s is being deleted; its annotation asks helm to keep it", r.release, f)
				}
			case f.released() && len(pods.Items) == 0:
				if logged[f.objectRef] {
					continue
				}
				logged[f.objectRef] = true
				t.Logf("helm uninstall %s deleted %s, which no pod uses (found %s)", r.release, f, how)
			default:
				t.Errorf("helm uninstall %s left %s (found %s)", r.release, f, how)
			}
		}
	}
	left("by its labels", l.c.byLabels(t, l.kinds, r.release))
	byName := l.c.byName(t, l.kinds, refsOf(rendered))
	left("by name", byName)
	if kept != nil && !slices.ContainsFunc(byName, func(f found) bool { return f.objectRef == *kept }) {
		t.Errorf("helm uninstall %s deleted %s; its annotation asks helm to keep it", r.release, *kept)
	}
	if got := l.c.releaseRecords(t, r.namespace, r.release); len(got) > 0 {
		t.Errorf("helm uninstall %s left its records %v", r.release, got)
	}
}

// refDiff says how the objects got differ from want, "" when they are
// the same.
func refDiff(want []objectRef, got []found) string {
	var b strings.Builder
	seen := map[objectRef]bool{}
	for _, f := range got {
		seen[f.objectRef] = true
		if !slices.Contains(want, f.objectRef) || f.deleting {
			fmt.Fprintf(&b, "  not rendered: %s\n", f)
		}
	}
	for _, w := range want {
		if !seen[w] {
			fmt.Fprintf(&b, "  missing: %s\n", w)
		}
	}
	return b.String()
}

// checkHistory checks helm history's JSON against want, one "revision
// status description" per revision, where a description may go on beyond
// what want says.
func checkHistory(t *testing.T, out string, want ...string) {
	t.Helper()
	var history []struct {
		Revision    int    `json:"revision"`
		Status      string `json:"status"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(out), &history); err != nil {
		t.Fatalf("helm history: %v\n%s", err, out)
	}
	var got []string
	for _, h := range history {
		got = append(got, fmt.Sprintf("%d %s %s", h.Revision, h.Status, h.Description))
	}
	if !slices.EqualFunc(got, want, strings.HasPrefix) {
		t.Errorf("helm history:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var (
	configmaps  = schema.GroupResource{Resource: "configmaps"}
	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
	nodes       = schema.GroupResource{Resource: "nodes"}
)

func set(grs ...schema.GroupResource) map[schema.GroupResource]bool {
	m := map[schema.GroupResource]bool{}
	for _, gr := range grs {
		m[gr] = true
	}
	return m
}

// awaitGrants waits until the token may do exactly what state grants, of
// what the lifecycle's revisions grant between them: list and watch
// ConfigMaps and Deployments in each namespace of the lifecycle, elsewhere
// and in all namespaces, list and watch Nodes, and create the
// leader-election Lease (a dry run). Anything else is Forbidden.
func awaitGrants(t *testing.T, c *cluster, token *rest.Config, r lifeRelease, state lifeState) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(token)
	if err != nil {
		t.Fatal(err)
	}
	var qs []access
	for _, gr := range []schema.GroupResource{configmaps, deployments} {
		for _, ns := range []string{lifeA, lifeB, elsewhere, ""} {
			qs = append(qs, access{verb: "list", gr: gr, namespace: ns}, access{verb: "watch", gr: gr, namespace: ns})
		}
	}
	qs = append(qs, access{verb: "list", gr: nodes}, access{verb: "watch", gr: nodes},
		access{verb: "create", gr: leases, namespace: r.namespace})

	do := func(a access) error {
		gvr, err := c.mapper.ResourceFor(a.gr.WithVersion(""))
		if err != nil {
			return err
		}
		ri := dyn.Resource(gvr).Namespace(a.namespace)
		switch a.verb {
		case "list":
			_, err = ri.List(t.Context(), metav1.ListOptions{Limit: 1})
		case "watch":
			var w watch.Interface
			if w, err = ri.Watch(t.Context(), metav1.ListOptions{}); err == nil {
				w.Stop()
			}
		case "create":
			lease := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
				"metadata": map[string]any{"name": r.fullname()},
			}}
			_, err = ri.Create(t.Context(), lease, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		}
		return err
	}
	poll.Until(t, rbacDelay, func() (bool, string) {
		var wrong []string
		for _, a := range qs {
			err := do(a)
			switch allowed := state.grants.allows(a); {
			case allowed && err != nil:
				wrong = append(wrong, fmt.Sprintf("%s: %v, want allowed", a, err))
			case !allowed && !apierrors.IsForbidden(err):
				wrong = append(wrong, fmt.Sprintf("%s: %v, want Forbidden", a, err))
			}
		}
		return len(wrong) == 0, fmt.Sprintf("%s at %s, with the ServiceAccount's token:\n  %s", r.release, state.name, strings.Join(wrong, "\n  "))
	})
}
