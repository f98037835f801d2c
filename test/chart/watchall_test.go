package chart

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/config"
)

// watchAll is the value set with watch.all: true. It is kept out of
// valueSets, whose checks list every resource granted by name; here what
// must be granted is computed from discovery (watchall_apiserver_test.go).
var watchAll = valueSet{name: "watch-all", release: "everything", namespace: "inventory", fullname: "everything-bridge"}

// watchAllValues is what the watch-all value set configures.
type watchAllValues struct {
	Watch struct {
		All         bool     `json:"all"`
		Exclude     []string `json:"exclude"`
		ExtraGroups []string `json:"extraGroups"`
	} `json:"watch"`
}

func readWatchAllValues(t *testing.T) watchAllValues {
	t.Helper()
	v := readYAML[watchAllValues](t, watchAll.file())
	if !v.Watch.All || len(v.Watch.ExtraGroups) == 0 || len(v.Watch.Exclude) == 0 {
		t.Fatalf("%s: the tests need watch.all, watch.exclude and watch.extraGroups set", watchAll.file())
	}
	return v
}

// readBuiltinTable reads charts/bridge/files/builtin-resources.yaml, which
// TestAPIServer checks against discovery.
func readBuiltinTable(t *testing.T) builtinTable {
	t.Helper()
	return readYAML[builtinTable](t, filepath.Join(chartDir, "files", "builtin-resources.yaml"))
}

// excludedBy is whether exclusions (names and *.<group> wildcards, as
// BRIDGE_EXCLUDE_RESOURCES takes them) exclude gr. A wildcard takes its
// group and the groups ending in .<group>.
func excludedBy(exclusions []string, gr schema.GroupResource) bool {
	for _, e := range exclusions {
		if g, ok := strings.CutPrefix(e, "*."); ok {
			if gr.Group == g || strings.HasSuffix(gr.Group, "."+g) {
				return true
			}
			continue
		}
		if groupOf(e) == gr {
			return true
		}
	}
	return false
}

// rule is one rendered RBAC rule.
type rule struct {
	groups, resources, verbs []string
}

// grantsRead is whether r lets its subject read gr.
func (r rule) grantsRead(gr schema.GroupResource) bool {
	return (slices.Contains(r.groups, gr.Group) || slices.Contains(r.groups, "*")) &&
		(slices.Contains(r.resources, gr.Resource) || slices.Contains(r.resources, "*")) &&
		slices.Contains(r.verbs, "list")
}

func rulesOf(t *testing.T, obj *unstructured.Unstructured) []rule {
	t.Helper()
	raw, _, err := unstructured.NestedSlice(obj.Object, "rules")
	if err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, r := range raw {
		m := r.(map[string]any)
		strs := func(key string) []string {
			l, _, err := unstructured.NestedStringSlice(m, key)
			if err != nil {
				t.Fatalf("%s %s: %s: %v", obj.GetKind(), obj.GetName(), key, err)
			}
			return l
		}
		rules = append(rules, rule{groups: strs("apiGroups"), resources: strs("resources"), verbs: strs("verbs")})
	}
	return rules
}

// followed are the definitions the bridge watches to follow CRDs and
// aggregated APIs that come and go: granted with watch.all even when
// excluded.
var followed = []schema.GroupResource{
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
	{Group: "apiregistration.k8s.io", Resource: "apiservices"},
}

// checkWatchAllRules checks the ClusterRole of watch.all without
// namespaces against the built-in table: only get, list and watch, one
// group per rule and never every group; the core group resource by
// resource; secrets only when named; every built-in resource that is not
// excluded granted, and no excluded one but the followed definitions.
func checkWatchAllRules(t *testing.T, rules []rule, table builtinTable, exclusions []string, secretsNamed bool) {
	t.Helper()
	for _, r := range rules {
		if !slices.Equal(r.verbs, readVerbs) {
			t.Errorf("rule %+v: verbs %v, want %v", r, r.verbs, readVerbs)
		}
		if len(r.groups) != 1 || r.groups[0] == "*" {
			t.Errorf("rule %+v: want one API group, not *", r)
		}
		if slices.Contains(r.groups, "") && slices.Contains(r.resources, "*") {
			t.Errorf("rule %+v grants every core resource, secrets too", r)
		}
	}
	granted := func(gr schema.GroupResource) bool {
		return slices.ContainsFunc(rules, func(r rule) bool { return r.grantsRead(gr) })
	}
	for group, e := range table {
		for _, res := range slices.Concat(e.Namespaced, e.Cluster) {
			gr := schema.GroupResource{Group: group, Resource: res}
			want := !excludedBy(exclusions, gr) || slices.Contains(followed, gr)
			if gr == (schema.GroupResource{Resource: "secrets"}) {
				want = secretsNamed
			}
			if got := granted(gr); got != want {
				t.Errorf("the ClusterRole grants %s: %v, want %v (exclusions %v)", gr, got, want, exclusions)
			}
		}
	}
}

// TestWatchAllRender: with watch.all, the bridge gets "*" and the
// exclusions, its loader accepts them, the tuning values are set only when
// given, and the ClusterRole grants by construction what checkWatchAllRules
// says.
func TestWatchAllRender(t *testing.T) {
	t.Parallel()
	v := readWatchAllValues(t)
	known := bridgeVariables(t)
	table := readBuiltinTable(t)
	defaultExclusions := []string{"events", "events.events.k8s.io", "leases.coordination.k8s.io"}

	cases := []struct {
		name       string
		args       []string
		resources  string
		exclusions []string
		tuning     map[string]string // nil: none of the tuning variables set
		secrets    bool
		// chartDefaults renders without the value set's file.
		chartDefaults bool
		// excludeEnv is BRIDGE_EXCLUDE_RESOURCES when it is not the
		// exclusions joined.
		excludeEnv string
	}{
		{name: "value set", resources: "*", exclusions: v.Watch.Exclude,
			tuning: map[string]string{"BRIDGE_LIST_CONCURRENCY": "4", "BRIDGE_KUBE_QPS": "20", "BRIDGE_KUBE_BURST": "40"}},
		{name: "secrets named", args: []string{"--set", "watch.resources={secrets}", "--set-json", "kubeClient.qps=12.5"}, resources: "*,secrets", exclusions: v.Watch.Exclude, secrets: true,
			tuning: map[string]string{"BRIDGE_LIST_CONCURRENCY": "4", "BRIDGE_KUBE_QPS": "12.5", "BRIDGE_KUBE_BURST": "40"}},
		{name: "named beside *", args: []string{"--set", "watch.resources={configmaps,deployments.apps}", "--set", "watch.clusterResources={nodes}"}, resources: "*,configmaps,deployments.apps,nodes", exclusions: v.Watch.Exclude,
			tuning: map[string]string{"BRIDGE_LIST_CONCURRENCY": "4", "BRIDGE_KUBE_QPS": "20", "BRIDGE_KUBE_BURST": "40"}},
		{name: "nothing excluded", args: []string{"--set-json", "watch.exclude=[]"}, resources: "*", exclusions: []string{}, excludeEnv: "none",
			tuning: map[string]string{"BRIDGE_LIST_CONCURRENCY": "4", "BRIDGE_KUBE_QPS": "20", "BRIDGE_KUBE_BURST": "40"}},
		{name: "every k8s.io group excluded", args: []string{"--set", "watch.exclude={*.k8s.io,events}"}, resources: "*", exclusions: []string{"*.k8s.io", "events"},
			tuning: map[string]string{"BRIDGE_LIST_CONCURRENCY": "4", "BRIDGE_KUBE_QPS": "20", "BRIDGE_KUBE_BURST": "40"}},
		// The chart's defaults, with watch.all only: no extra group, the
		// bridge's exclusions, no tuning.
		{name: "defaults", args: []string{"--set", "watch.all=true", "--set-json", "watch.resources=[]"}, resources: "*", exclusions: defaultExclusions, chartDefaults: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var objs []*unstructured.Unstructured
			if tc.chartDefaults {
				manifest, err := template(t, watchAll.release, watchAll.namespace, tc.args...)
				if err != nil {
					t.Fatal(err)
				}
				if objs, err = decodeManifest(manifest); err != nil {
					t.Fatal(err)
				}
			} else {
				objs = render(t, watchAll, tc.args...)
			}
			d := deployment(t, objs)
			env := d.Spec.Template.Spec.Containers[0].Env
			want(t, "BRIDGE_RESOURCES", envValue(env, "BRIDGE_RESOURCES"), tc.resources)
			excludeEnv := strings.Join(tc.exclusions, ",")
			if tc.excludeEnv != "" {
				excludeEnv = tc.excludeEnv
			}
			want(t, "BRIDGE_EXCLUDE_RESOURCES", envValue(env, "BRIDGE_EXCLUDE_RESOURCES"), excludeEnv)
			for _, name := range []string{"BRIDGE_LIST_CONCURRENCY", "BRIDGE_KUBE_QPS", "BRIDGE_KUBE_BURST"} {
				value, set := tc.tuning[name]
				has := slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
				if has != set || envValue(env, name) != value {
					t.Errorf("%s: set %v to %q, want set %v to %q", name, has, envValue(env, name), set, value)
				}
			}
			environ := environment(t, watchAll, d, known)
			if _, err := config.Load(environ); err != nil {
				t.Fatalf("the bridge refuses the chart's environment: %v\n%s", err, strings.Join(environ, "\n"))
			}

			roles := only(objs, "ClusterRole")
			if len(roles) != 1 || len(only(objs, "Role")) != 0 {
				t.Fatalf("%d ClusterRoles and %d Roles rendered, want one ClusterRole", len(roles), len(only(objs, "Role")))
			}
			rules := rulesOf(t, roles[0])
			checkWatchAllRules(t, rules, table, tc.exclusions, tc.secrets)
			extra := 0
			for _, r := range rules {
				if _, ok := table[r.groups[0]]; !ok {
					extra++
				}
			}
			if tc.chartDefaults && extra != 0 {
				t.Errorf("without watch.extraGroups, %d rules grant groups that are not built in: %v", extra, rules)
			}
			if !tc.chartDefaults {
				for _, g := range v.Watch.ExtraGroups {
					if !slices.ContainsFunc(rules, func(r rule) bool {
						return slices.Equal(r.groups, []string{g}) && slices.Equal(r.resources, []string{"*"})
					}) {
						t.Errorf("no rule grants extra group %s whole: %v", g, rules)
					}
				}
			}
		})
	}

	// With namespaces: a Role in each for the namespaced resources; the
	// ClusterRole names the built-in cluster-scoped ones one by one, and
	// grants no namespaced resource.
	t.Run("namespaces", func(t *testing.T) {
		t.Parallel()
		objs := render(t, watchAll, "--set", "watch.namespaces={team-a,team-b}")
		if n := len(only(objs, "Role")); n != 2 {
			t.Errorf("%d Roles, want 2", n)
		}
		roles := only(objs, "ClusterRole")
		if len(roles) != 1 {
			t.Fatalf("%d ClusterRoles, want 1", len(roles))
		}
		for _, r := range rulesOf(t, roles[0]) {
			if slices.Contains(r.resources, "*") {
				t.Errorf("ClusterRole rule %+v grants a whole group, its namespaced resources in every namespace", r)
			}
			for _, res := range r.resources {
				if slices.Contains(table[r.groups[0]].Namespaced, res) {
					t.Errorf("ClusterRole rule %+v grants namespaced %s in every namespace", r, res)
				}
			}
		}
	})
}
