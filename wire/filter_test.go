package wire

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTemplateFilter(t *testing.T) {
	longCluster := strings.Repeat("c", 300)
	for _, tc := range []struct {
		name, layout, cluster, namespace string
		gr                               schema.GroupResource
		want                             string
	}{
		{"state, core, all namespaces", DefaultStateSubject, "prod", "", schema.GroupResource{Resource: "configmaps"}, "kube.prod.core.configmaps.*.*"},
		{"state, one namespace", DefaultStateSubject, "prod", "team-a", schema.GroupResource{Group: "apps", Resource: "deployments"}, "kube.prod.apps.deployments.team-a.*"},
		{"history, dotted group and cluster", DefaultHistorySubject, "eu.west", "", schema.GroupResource{Group: "example.com", Resource: "widgets"}, "kube.eu_west.example_com.*.widgets.*.*"},
		{"kind and action are wildcards", "{prefix}.{cluster}.{resource}.{kind}.{action}.{namespace}.{name}", "prod", "ns_1", schema.GroupResource{Resource: "pods"}, "kube.prod.pods.*.*.ns%5F1.*"},
		{"long cluster is bounded as in subjects", DefaultStateSubject, longCluster, "", schema.GroupResource{Resource: "configmaps"}, "kube." + EscapeToken(longCluster) + ".core.configmaps.*.*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := ParseSubjectTemplate(tc.layout, "kube")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Filter(tc.cluster, tc.gr, tc.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Filter = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTemplateFilterMatchesSubject checks that the filter of an object's
// resource matches the subject the sink publishes it to, long names too.
func TestTemplateFilterMatchesSubject(t *testing.T) {
	tmpl, err := ParseSubjectTemplate(DefaultStateSubject, "kube")
	if err != nil {
		t.Fatal(err)
	}
	m := &Message{ID: "1", Cluster: strings.Repeat("k", 400), Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Namespace: "ns", Name: strings.Repeat("n.", 300), Action: "added"}
	subj, err := tmpl.Subject(m)
	if err != nil {
		t.Fatal(err)
	}
	filter, err := tmpl.Filter(m.Cluster, m.Resource.GroupResource(), m.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	ft, st := strings.Split(filter, "."), strings.Split(subj, ".")
	if len(ft) != len(st) {
		t.Fatalf("filter %q and subject %q differ in tokens", filter, subj)
	}
	for i := range ft {
		if ft[i] != "*" && ft[i] != st[i] {
			t.Errorf("token %d: filter %q does not match subject %q", i, ft[i], st[i])
		}
	}
	if _, err := tmpl.Filter("", m.Resource.GroupResource(), ""); err == nil {
		t.Error("Filter with an empty cluster: no error")
	}
}
