package access

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

const testRules = `
apiVersion: replica.kubebus.io/v1
kind: AccessRules
grants:
- subjects:
  - {kind: User, name: alice}
  - {kind: Group, name: sre}
  clusters: ["prod", "staging"]
  rules:
  - apiGroups: [""]
    resources: ["pods", "configmaps"]
    namespaces: ["team-a"]
    verbs: ["get", "list", "watch"]
- subjects: [{kind: Group, name: admins}]
  clusters: ["*"]
  rules:
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: ["*"]
- subjects: [{kind: User, name: vault}]
  clusters: ["prod"]
  rules:
  - apiGroups: [""]
    resources: ["secrets"]
    namespaces: ["vault"]
    resourceNames: ["unseal"]
    verbs: ["get"]
  - apiGroups: ["apps"]
    resources: ["deployments"]
    verbs: ["list"]
- subjects: [{kind: User, name: auditor}]
  clusters: ["staging"]
  rules:
  - apiGroups: [""]
    resources: ["*/status", "nodes"]
    verbs: ["watch"]
- subjects: [{kind: User, name: erin}]
  clusters: ["prod"]
  rules:
  - apiGroups: ["*"]
    resources: ["*"]
    namespaces: ["team-a"]
    verbs: ["*"]
  - apiGroups: [""]
    resources: ["configmaps"]
    namespaces: ["team-b"]
    resourceNames: ["settings"]
    verbs: ["list", "watch"]
`

func mustParse(t *testing.T, data string) *Rules {
	t.Helper()
	r, err := ParseRules([]byte(data), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func usr(name string, groups ...string) user.Info {
	return &user.DefaultInfo{Name: name, Groups: groups}
}

func res(u user.Info, verb, group, resource, ns, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "v1",
		Resource: resource, Namespace: ns, Name: name, ResourceRequest: true}
}

func nonRes(u user.Info, verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Path: path}
}

func TestRulesAuthorize(t *testing.T) {
	rules := mustParse(t, testRules)
	alice, bob := usr("alice"), usr("bob")
	sre, admin, vault, auditor := usr("carol", "sre"), usr("dan", "admins"), usr("vault"), usr("auditor")
	erin := usr("erin")
	withSub := func(a authorizer.AttributesRecord, sub string) authorizer.AttributesRecord {
		a.Subresource = sub
		return a
	}
	cases := []struct {
		name    string
		cluster string // "-" for none
		attrs   authorizer.AttributesRecord
		allow   bool
	}{
		{"user by name", "prod", res(alice, "list", "", "pods", "team-a", ""), true},
		{"user by group", "staging", res(sre, "watch", "", "configmaps", "team-a", ""), true},
		{"no grant for the user", "prod", res(bob, "get", "", "pods", "team-a", "p"), false},
		{"cluster not granted", "dev", res(alice, "list", "", "pods", "team-a", ""), false},
		{"other namespace", "prod", res(alice, "list", "", "pods", "team-b", ""), false},
		{"list across namespaces with a namespaced rule", "prod", res(alice, "list", "", "pods", "", ""), false},
		{"cluster-scoped with a namespaced rule", "prod", res(alice, "get", "", "namespaces", "", "team-a"), false},
		{"resource not named", "prod", res(alice, "list", "", "services", "team-a", ""), false},
		{"group not named", "prod", res(alice, "list", "apps", "pods", "team-a", ""), false},
		{"subresource not named", "prod", withSub(res(alice, "get", "", "pods", "team-a", "p"), "log"), false},
		{"write verb", "prod", res(alice, "delete", "", "pods", "team-a", "p"), false},
		{"verb star in the request", "prod", res(alice, "*", "", "pods", "team-a", ""), false},

		{"wildcards: any cluster, group, resource", "any", res(admin, "watch", "apps", "deployments", "", ""), true},
		{"wildcards: cluster-scoped", "any", res(admin, "get", "", "nodes", "", "n1"), true},
		{"wildcards: subresource", "any", withSub(res(admin, "get", "", "pods", "x", "p"), "status"), true},
		{"wildcards never cover secrets", "any", res(admin, "get", "", "secrets", "x", "s"), false},
		{"wildcards never cover secrets in a list", "any", res(admin, "list", "", "secrets", "", ""), false},
		{"wildcards never cover secrets' subresources", "any", withSub(res(admin, "get", "", "secrets", "x", "s"), "status"), false},
		// Resources are lowercase: another spelling of secrets is not a
		// resource a wildcard covers.
		{"wildcards never cover SECRETS", "any", res(admin, "get", "", "SECRETS", "x", "s"), false},
		{"wildcards never cover Secrets in a list", "any", res(admin, "list", "", "Secrets", "", ""), false},
		{"wildcards never cover a non-ASCII secrets", "any", res(admin, "get", "", "\u017fecrets", "x", "s"), false},
		{"wildcards never cover an upper-case subresource", "any", withSub(res(admin, "get", "", "pods", "x", "p"), "Status"), false},
		{"wildcards never cover an empty resource", "any", res(admin, "get", "", "", "x", "s"), false},
		{"namespace-limited wildcard: NAMESPACES", "prod", res(erin, "get", "", "NAMESPACES", "team-a", "team-a"), false},
		{"wildcard verbs are only get/list/watch", "any", res(admin, "create", "", "pods", "x", ""), false},

		{"secrets named, the named one", "prod", res(vault, "get", "", "secrets", "vault", "unseal"), true},
		{"secrets named, another name", "prod", res(vault, "get", "", "secrets", "vault", "root"), false},
		{"secrets named, list not granted", "prod", res(vault, "list", "", "secrets", "vault", ""), false},
		{"secrets named, verb not granted", "prod", res(vault, "watch", "", "secrets", "vault", "unseal"), false},
		{"secrets named, other namespace", "prod", res(vault, "get", "", "secrets", "default", "unseal"), false},
		{"second rule of a grant", "prod", res(vault, "list", "apps", "deployments", "", ""), true},
		{"second rule, verb not granted", "prod", res(vault, "get", "apps", "deployments", "x", "d"), false},

		{"*/status matches a status subresource", "staging", withSub(res(auditor, "watch", "", "pods", "x", ""), "status"), true},
		{"*/status does not match the resource", "staging", res(auditor, "watch", "", "pods", "x", ""), false},
		{"*/status does not match secrets/status", "staging", withSub(res(auditor, "watch", "", "secrets", "x", ""), "status"), false},
		{"cluster-scoped with an every-namespace rule", "staging", res(auditor, "watch", "", "nodes", "", ""), true},

		// RequestInfo reads /api/v1/namespaces/team-a as namespace team-a,
		// resource namespaces, name team-a: the Namespace object is
		// cluster-scoped, and a namespace-limited rule does not cover it.
		{"namespace-limited wildcard: in its namespace", "prod", res(erin, "get", "", "pods", "team-a", "p"), true},
		{"namespace-limited wildcard: its Namespace object", "prod", res(erin, "get", "", "namespaces", "team-a", "team-a"), false},
		{"namespace-limited wildcard: its Namespace's status", "prod", withSub(res(erin, "get", "", "namespaces", "team-a", "team-a"), "status"), false},
		{"namespace-limited wildcard: its Namespace's finalize", "prod", withSub(res(erin, "get", "", "namespaces", "team-a", "team-a"), "finalize"), false},
		{"namespace-limited wildcard: watch its Namespace", "prod", res(erin, "watch", "", "namespaces", "team-a", "team-a"), false},
		{"namespace-limited wildcard: namespaces in any group", "prod", res(erin, "get", "example.io", "namespaces", "team-a", "team-a"), false},
		{"namespace-limited wildcard: list namespaces", "prod", res(erin, "list", "", "namespaces", "", ""), false},
		// A list or watch carries a name when its metadata.name field
		// selector names one (RequestInfo reads it); a rule with
		// resourceNames allows it only then, and only for those names.
		{"resourceNames: a list without a name", "prod", res(erin, "list", "", "configmaps", "team-b", ""), false},
		{"resourceNames: a watch without a name", "prod", res(erin, "watch", "", "configmaps", "team-b", ""), false},
		{"resourceNames: a list of the name", "prod", res(erin, "list", "", "configmaps", "team-b", "settings"), true},
		{"resourceNames: a watch of the name", "prod", res(erin, "watch", "", "configmaps", "team-b", "settings"), true},
		{"resourceNames: a list of another name", "prod", res(erin, "list", "", "configmaps", "team-b", "other"), false},
		{"wildcards: a Namespace object", "any", res(admin, "get", "", "namespaces", "team-a", "team-a"), true},
		{"wildcards: a Namespace's status", "any", withSub(res(admin, "get", "", "namespaces", "team-a", "team-a"), "status"), true},

		{"all clusters: allowed on one", AllClusters, res(alice, "list", "", "pods", "team-a", ""), true},
		{"all clusters: allowed on none", AllClusters, res(bob, "list", "", "pods", "team-a", ""), false},
		{"all clusters: not that resource anywhere", AllClusters, res(vault, "list", "", "pods", "vault", ""), false},

		{"discovery with a grant", "prod", nonRes(alice, "get", "/apis"), true},
		{"discovery of a group version", "prod", nonRes(alice, "get", "/apis/apps/v1"), true},
		{"discovery of /api/v1", "staging", nonRes(sre, "get", "/api/v1"), true},
		{"discovery of a group", "prod", nonRes(alice, "get", "/apis/apps"), true},
		{"version", "prod", nonRes(alice, "get", "/version"), true},
		{"openapi", "prod", nonRes(alice, "get", "/openapi/v3/api/v1"), true},
		{"openapi v2", "prod", nonRes(alice, "get", "/openapi/v2"), true},
		{"openapi v3", "prod", nonRes(alice, "get", "/openapi/v3"), true},
		{"openapi of a group version", "prod", nonRes(alice, "get", "/openapi/v3/apis/apps/v1"), true},
		// Discovery is those paths, nothing deeper: a non-resource request
		// for what would be a resource's path is no discovery.
		{"non-resource under a group version", "prod", nonRes(alice, "get", "/apis/g/v/namespaces/x/secrets"), false},
		{"non-resource under the core version", "prod", nonRes(alice, "get", "/api/v1/namespaces/x/secrets/s"), false},
		{"non-resource resource of the core group", "prod", nonRes(alice, "get", "/api/v1/pods"), false},
		{"non-resource resource of a group", "prod", nonRes(alice, "get", "/apis/apps/v1/deployments"), false},
		{"below /version", "prod", nonRes(alice, "get", "/version/x"), false},
		{"openapi, deeper than a group version", "prod", nonRes(alice, "get", "/openapi/v3/apis/apps/v1/x"), false},
		{"openapi of another version", "prod", nonRes(alice, "get", "/openapi/v4"), false},
		{"openapi v2, deeper", "prod", nonRes(alice, "get", "/openapi/v2/x"), false},
		{"trailing slash", "prod", nonRes(alice, "get", "/apis/"), false},
		{"discovery on all clusters", AllClusters, nonRes(vault, "get", "/api"), true},
		{"discovery without a grant on the cluster", "dev", nonRes(alice, "get", "/apis"), false},
		{"discovery without any grant", "prod", nonRes(bob, "get", "/api"), false},
		{"discovery without any grant on all clusters", AllClusters, nonRes(bob, "get", "/api"), false},
		{"other non-resource path", "prod", nonRes(alice, "get", "/healthz"), false},
		{"unclean path", "prod", nonRes(alice, "get", "/apis/../healthz"), false},
		{"non-resource post", "prod", nonRes(alice, "post", "/apis"), false},
		{"no cluster in context", "-", nonRes(admin, "get", "/version"), false},
		{"no cluster in context, resource", "-", res(admin, "get", "", "pods", "x", "p"), false},
		{"no user", "prod", res(nil, "get", "", "pods", "team-a", "p"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.cluster != "-" {
				ctx = WithCluster(ctx, c.cluster)
			}
			d, reason, err := rules.Authorize(ctx, c.attrs)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got := d == authorizer.DecisionAllow; got != c.allow {
				t.Fatalf("allowed %v, want %v: %s", got, c.allow, reason)
			}
			if d != authorizer.DecisionAllow && d != authorizer.DecisionDeny {
				t.Fatalf("decision %v, want Allow or Deny", d)
			}
			// The reason names the user, the verb, the resource and the cluster.
			for _, want := range []string{c.attrs.Verb, c.attrs.Resource, c.attrs.Path} {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q does not name %q", reason, want)
				}
			}
			if c.attrs.User != nil && !strings.Contains(reason, `"`+c.attrs.User.GetName()+`"`) {
				t.Errorf("reason %q does not name the user", reason)
			}
			if c.cluster != "-" && !strings.Contains(reason, `cluster "`+c.cluster+`"`) {
				t.Errorf("reason %q does not name the cluster", reason)
			}
			if c.allow && !strings.Contains(reason, "rules.yaml grants[") {
				t.Errorf("reason %q does not name the rule that allowed", reason)
			}
		})
	}
}

func TestRulesScope(t *testing.T) {
	rules := mustParse(t, testRules)
	cases := []struct {
		name  string
		attrs authorizer.AttributesRecord
		all   bool
		has   []string
		not   []string
	}{
		{"named clusters", res(usr("alice"), "list", "", "pods", "team-a", ""), false, []string{"prod", "staging"}, []string{"dev", AllClusters}},
		{"user and group add up", res(usr("vault", "sre"), "list", "", "configmaps", "team-a", ""), false, []string{"prod", "staging"}, []string{"dev"}},
		{"every cluster", res(usr("dan", "admins"), "list", "", "pods", "", ""), true, []string{"prod", "dev"}, nil},
		{"every cluster, but not secrets", res(usr("dan", "admins"), "list", "", "secrets", "", ""), false, nil, []string{"prod", "dev"}},
		{"only where the rule matches", res(usr("vault"), "get", "", "secrets", "vault", "unseal"), false, []string{"prod"}, []string{"staging"}},
		{"none", res(usr("bob"), "list", "", "pods", "team-a", ""), false, nil, []string{"prod"}},
		{"discovery", nonRes(usr("carol", "sre"), "get", "/apis"), false, []string{"prod", "staging"}, []string{"dev"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := rules.Scope(c.attrs)
			if s.All() != c.all {
				t.Errorf("All() = %v, want %v", s.All(), c.all)
			}
			if s.Empty() != (!c.all && len(c.has) == 0) {
				t.Errorf("Empty() = %v", s.Empty())
			}
			for _, n := range c.has {
				if !s.Has(n) {
					t.Errorf("Has(%q) = false, want true", n)
				}
			}
			for _, n := range c.not {
				if s.Has(n) {
					t.Errorf("Has(%q) = true, want false", n)
				}
			}
		})
	}
}
