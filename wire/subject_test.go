package wire

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTemplateSubject(t *testing.T) {
	deploy := &Message{
		ID: "1", Cluster: "prod", Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Kind: "Deployment", Namespace: "team-a", Name: "web", Action: "updated",
	}
	node := &Message{
		ID: "2", Cluster: "prod", Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"},
		Kind: "Node", Name: "ip-10-0-1-5.ec2.internal", Action: "added",
	}
	widget := &Message{
		ID: "3", Cluster: "eu.west", Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "widgets"},
		Kind: "Widget", Namespace: "ns", Name: "w_1", Action: "deleted",
	}
	for _, tc := range []struct {
		name, layout, prefix string
		msg                  *Message
		want                 string
	}{
		{"default apps", DefaultHistorySubject, "kube", deploy, "kube.prod.apps.v1.deployments.team-a.web"},
		{"core group and cluster-scoped", DefaultHistorySubject, "kube", node, "kube.prod.core.v1.nodes._.ip-10-0-1-5_ec2_internal"},
		{"dotted group, cluster and escaped name", DefaultHistorySubject, "kube", widget, "kube.eu_west.example_com.v1alpha1.widgets.ns.w%5F1"},
		{"prefix of two tokens", DefaultHistorySubject, "acme.k8s", deploy, "acme.k8s.prod.apps.v1.deployments.team-a.web"},
		{"kind and action", "{prefix}.{kind}.{action}.{namespace}.{name}", "kube", deploy, "kube.Deployment.updated.team-a.web"},
		{"fixed words", "{prefix}.changes.{resource}.v2", "kube", node, "kube.changes.nodes.v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := ParseSubjectTemplate(tc.layout, tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Subject(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Subject = %q, want %q", got, tc.want)
			}
			if !SubjectMatches(StreamSubject(tc.prefix), got) {
				t.Errorf("%q is not under %s", got, StreamSubject(tc.prefix))
			}
		})
	}
}

func TestTemplateSubjectEmptyValue(t *testing.T) {
	tmpl, err := ParseSubjectTemplate(DefaultHistorySubject, "kube")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Subject(&Message{ID: "x", Cluster: "c", Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ns"})
	if err == nil || !strings.Contains(err.Error(), "{name}") {
		t.Fatalf("err = %v, want one naming {name}", err)
	}
}

func TestParseTemplateRejects(t *testing.T) {
	for _, tc := range []struct{ name, layout, prefix, want string }{
		{"no prefix first", "{cluster}.{prefix}.{name}", "kube", "must start with {prefix}"},
		{"prefix twice", "{prefix}.{prefix}.{name}", "kube", "only once"},
		{"literal first", "kube.{name}", "kube", "must start with {prefix}"},
		{"unknown placeholder", "{prefix}.{uid}", "kube", "unknown placeholder {uid}"},
		{"part of a token", "{prefix}.ns-{namespace}", "kube", "whole token"},
		{"unclosed", "{prefix}.{name", "kube", "whole token"},
		{"empty token", "{prefix}..{name}", "kube", "must not be empty"},
		{"wildcard", "{prefix}.*.{name}", "kube", `"*"`},
		{"full wildcard", "{prefix}.>", "kube", `">"`},
		{"space", "{prefix}.a b", "kube", "whitespace"},
		{"empty prefix", DefaultHistorySubject, "", "must not be empty"},
		{"system prefix", DefaultHistorySubject, "$JS", `"$"`},
		{"prefix with wildcard", DefaultHistorySubject, "kube.*", `"*"`},
		{"prefix with empty token", DefaultHistorySubject, "kube.", "must not be empty"},
		{"prefix too long", DefaultHistorySubject, strings.Repeat("p", 1600), "longest subject would be 3142 bytes, above 3072"},
		{"fixed words too long", "{prefix}." + strings.Repeat("w.", 1600) + "{name}", "kube", "longest subject would be 3461 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSubjectTemplate(tc.layout, tc.prefix)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseSubjectTemplate(%q, %q) = %v, want an error containing %s", tc.layout, tc.prefix, err, tc.want)
			}
		})
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"kube.>", "kube.a.b", true},
		{"kube.>", "kube", false},
		{"kube.*.b", "kube.a.b", true},
		{"kube.*.b", "kube.a.c", false},
		{"kube.*", "kube.a.b", false},
		{"kube.prod.apps.v1.deployments.team-a.>", "kube.prod.apps.v1.deployments.team-a.web", true},
		{"other.>", "kube.a", false},
		{"kube.a", "kube.a", true},
	} {
		t.Run(tc.pattern+" "+tc.subject, func(t *testing.T) {
			if got := SubjectMatches(tc.pattern, tc.subject); got != tc.want {
				t.Errorf("SubjectMatches(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
			}
		})
	}
}

// A subject that would still pass the limit, as a last guard, is never
// returned: the error names the object and the limit.
func TestSubjectOverLimit(t *testing.T) {
	tmpl, err := ParseSubjectTemplate(DefaultStateSubject, "kube")
	if err != nil {
		t.Fatal(err)
	}
	tmpl.limit = 100 // as if the fixed parts were long
	m := &Message{ID: "x", Cluster: "c", Resource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		Name: strings.Repeat("n", 90), Subject: strings.Repeat("n", 90)}
	got, err := tmpl.Subject(m)
	if err == nil || !strings.Contains(err.Error(), "clusterroles") || !strings.Contains(err.Error(), "longer than 100") || !strings.Contains(err.Error(), "nnnn") {
		t.Fatalf("Subject = %q, %v; want an error naming the ClusterRole and the limit", got, err)
	}
	m.Name, m.Subject = "short", "short"
	if _, err := tmpl.Subject(m); err != nil {
		t.Fatalf("short name: %v", err)
	}
}
