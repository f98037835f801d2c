package access

import (
	"context"
	"fmt"
	"path"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Rules is a parsed rules file: which identities may read what, on which
// clusters. It is immutable, and safe for concurrent use.
//
// Rules implements [authorizer.Authorizer] for requests whose context
// carries their cluster ([WithCluster]):
//   - A resource request is allowed when a rule of a grant whose subjects
//     include the user (by name) or one of its groups names the cluster,
//     the verb, the API group, the resource, the namespace and the name.
//     On [AllClusters] it is allowed when that holds on at least one
//     cluster; [Rules.Scope] says which.
//   - A resource named "*" never covers secrets: only a rule that names
//     secrets serves them. A resource or subresource that is not
//     lowercase ASCII letters, digits and dashes (SECRETS) is denied
//     whatever the rules.
//   - A rule with namespaces covers namespaced requests in those
//     namespaces only: never a list across all namespaces, nor the
//     resource namespaces (in any API group), though RequestInfo puts
//     /api/v1/namespaces/team-a and its status in namespace team-a. Other
//     cluster-scoped resources are read without a namespace; the server
//     must answer a cluster-scoped resource asked for under
//     /namespaces/<ns>/ with 404, as kube-apiserver does, or a
//     namespace-limited rule of "*" would cover it.
//   - A non-resource request is allowed when it is a GET of discovery
//     (/api, /api/<version>, /apis, /apis/<group>, /apis/<group>/<version>,
//     /version, /openapi/v2, /openapi/v3 and /openapi/v3/ followed by
//     api/<version> or apis/<group>/<version>; nothing deeper) and the
//     identity has any grant on the cluster. An identity with no grant on a
//     cluster is denied discovery, get, list and watch alike.
//   - A rule with resourceNames covers a list or watch only when the
//     request carries one of those names: RequestInfo reads it from the
//     metadata.name field selector (?fieldSelector=metadata.name=<name>),
//     and a list or watch without it is denied. The server must then
//     answer with that object only, applying the request's metadata.name
//     field selector exactly as its RequestInfo read it; a server that
//     ignored the selector would serve every object of the resource to a
//     rule for one name.
//   - A request whose context carries no cluster is denied: the server
//     serves what needs no grant (health, metrics) outside this authorizer.
//   - Every verb but get, list and watch is denied.
//
// Every decision's reason names the user, the cluster, the verb and the
// resource, and for an allowed request the grant and rule that allowed it.
// It never holds a credential.
type Rules struct {
	source  string
	byUser  map[string][]*rule
	byGroup map[string][]*rule
	rules   int
}

var _ authorizer.Authorizer = (*Rules)(nil)

// Source is the name of the file the rules were read from.
func (r *Rules) Source() string { return r.source }

// Len is the number of rules, counted across grants.
func (r *Rules) Len() int { return r.rules }

// rule is one rule of one grant, with the grant's clusters.
type rule struct {
	at         string // grants[0].rules[1], for reasons
	clusters   nameSet
	apiGroups  nameSet
	resources  []string
	verbs      verbSet
	namespaces nameSet // every namespace when all
	names      nameSet // every name when all
}

type verbSet uint8

var verbBits = map[string]verbSet{"get": 1, "list": 2, "watch": 4, Wildcard: 7}

// nameSet is a set of names, or every name.
type nameSet struct {
	all   bool
	names map[string]struct{}
}

func newNameSet(list []string) nameSet {
	s := nameSet{names: make(map[string]struct{}, len(list))}
	for _, n := range list {
		if n == Wildcard {
			s.all = true
		}
		s.names[n] = struct{}{}
	}
	return s
}

func (s nameSet) has(n string) bool {
	if s.all {
		return true
	}
	_, ok := s.names[n]
	return ok
}

func compile(d *rulesDoc, source string) *Rules {
	rs := &Rules{source: source, byUser: map[string][]*rule{}, byGroup: map[string][]*rule{}}
	for gi, g := range d.Grants {
		clusters := newNameSet(g.Clusters)
		for ri, rd := range g.Rules {
			ru := &rule{
				at:         fmt.Sprintf("grants[%d].rules[%d]", gi, ri),
				clusters:   clusters,
				apiGroups:  newNameSet(rd.APIGroups),
				resources:  rd.Resources,
				namespaces: nameSet{all: true},
				names:      nameSet{all: true},
			}
			for _, v := range rd.Verbs {
				ru.verbs |= verbBits[v]
			}
			if rd.Namespaces != nil {
				ru.namespaces = newNameSet(rd.Namespaces)
			}
			if len(rd.ResourceNames) > 0 {
				ru.names = newNameSet(rd.ResourceNames)
				ru.names.all = false // "*" is a name like any other here, as in RBAC
			}
			rs.rules++
			for _, s := range g.Subjects {
				switch s.Kind {
				case SubjectUser:
					rs.byUser[s.Name] = append(rs.byUser[s.Name], ru)
				case SubjectGroup:
					rs.byGroup[s.Name] = append(rs.byGroup[s.Name], ru)
				}
			}
		}
	}
	return rs
}

// forUser calls f with each rule that applies to u, until f returns false.
// A rule granted to the user and to one of its groups is seen twice.
func (r *Rules) forUser(u user.Info, f func(*rule) bool) {
	if u == nil {
		return
	}
	for _, ru := range r.byUser[u.GetName()] {
		if !f(ru) {
			return
		}
	}
	for _, g := range u.GetGroups() {
		for _, ru := range r.byGroup[g] {
			if !f(ru) {
				return
			}
		}
	}
}

// matches reports whether ru allows the resource request a, on whatever
// cluster.
func (ru *rule) matches(a authorizer.Attributes) bool {
	return ru.verbs&verbBits[a.GetVerb()] != 0 && a.GetVerb() != Wildcard &&
		resourceName(a.GetResource()) && (a.GetSubresource() == "" || resourceName(a.GetSubresource())) &&
		ru.apiGroups.has(a.GetAPIGroup()) &&
		ru.resourceMatches(a.GetResource(), a.GetSubresource()) &&
		(ru.namespaces.all || ru.namespaced(a)) &&
		(ru.names.all || (a.GetName() != "" && ru.names.has(a.GetName())))
}

// namespacesResource is the Namespace objects' resource. RequestInfo reads
// /api/v1/namespaces/team-a (and its status and finalize) as in namespace
// team-a, yet a Namespace is cluster-scoped.
const namespacesResource = "namespaces"

// namespaced reports whether a, a request in one namespace, is in one of
// the namespaces ru is limited to. The namespaces resource, in whatever
// API group, is never: only a rule without a namespace limit covers it.
func (ru *rule) namespaced(a authorizer.Attributes) bool {
	return a.GetNamespace() != "" && a.GetResource() != namespacesResource && ru.namespaces.has(a.GetNamespace())
}

// resourceName reports whether s is spelt as the API server names
// resources and subresources: lowercase ASCII letters, digits and dashes,
// not empty. Another spelling (SECRETS, Secrets, a non-ASCII letter) is
// no resource a rule covers, so that no spelling of secrets slips past the
// rule that wildcards never cover them, whatever the server makes of it.
func resourceName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// secrets is the resource that no wildcard covers, in any API group.
const secrets = "secrets"

// resourceMatches is RBAC's resource match, with secrets left out of
// wildcards: "pods" matches pods, "pods/log" pods' log subresource, "*"
// every resource and subresource, "*/scale" every scale subresource.
func (ru *rule) resourceMatches(resource, sub string) bool {
	combined := resource
	if sub != "" {
		combined = resource + "/" + sub
	}
	for _, r := range ru.resources {
		switch {
		case r == combined:
			return true
		case resource == secrets:
			// Only the name itself serves secrets.
		case r == Wildcard:
			return true
		case sub != "" && len(r) == len(sub)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, sub):
			return true
		}
	}
	return false
}

// discovery reports whether a non-resource request is one of discovery:
// a GET of /api, /api/<version>, /apis, /apis/<group>,
// /apis/<group>/<version>, /version, /openapi/v2, /openapi/v3,
// /openapi/v3/api/<version> or /openapi/v3/apis/<group>/<version>, and
// nothing deeper, which would be a resource's path.
func discovery(a authorizer.Attributes) bool {
	p := a.GetPath()
	if a.GetVerb() != "get" || p != path.Clean(p) || !strings.HasPrefix(p, "/") {
		return false
	}
	parts := strings.Split(p[1:], "/")
	if parts[0] == "openapi" {
		switch {
		case len(parts) == 2:
			return parts[1] == "v2" || parts[1] == "v3"
		case len(parts) > 2 && parts[1] == "v3":
			parts = parts[2:] // the document of a group version
			return parts[0] == "api" && len(parts) == 2 || parts[0] == "apis" && len(parts) == 3
		}
		return false
	}
	switch parts[0] {
	case "version":
		return len(parts) == 1
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

// Authorize decides a request whose context carries its cluster; see
// [Rules] for the rules. It never returns an error.
func (r *Rules) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	cluster, ok := ClusterFrom(ctx)
	if !ok {
		return authorizer.DecisionDeny, fmt.Sprintf("access: %s: the request names no cluster", describe(a, "")), nil
	}
	var by *rule
	r.forUser(a.GetUser(), func(ru *rule) bool {
		if cluster != AllClusters && !ru.clusters.has(cluster) {
			return true
		}
		if a.IsResourceRequest() && !ru.matches(a) || !a.IsResourceRequest() && !discovery(a) {
			return true
		}
		by = ru
		return false
	})
	if by == nil {
		return authorizer.DecisionDeny, fmt.Sprintf("access: %s: no rule in %s allows it", describe(a, cluster), r.source), nil
	}
	return authorizer.DecisionAllow, fmt.Sprintf("access: %s: allowed by %s %s", describe(a, cluster), r.source, by.at), nil
}

// ConditionsAwareAuthorize is Authorize: these rules have no conditions.
func (r *Rules) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

// EvaluateConditions denies: these rules have no conditions.
func (r *Rules) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// Scope is the set of clusters on which one request is allowed: every
// cluster, or some by name. The zero Scope holds none.
type Scope struct {
	all   bool
	names map[string]struct{}
}

// Has reports whether the request is allowed on cluster.
func (s Scope) Has(cluster string) bool {
	if s.all {
		return true
	}
	_, ok := s.names[cluster]
	return ok
}

// All reports whether the request is allowed on every cluster.
func (s Scope) All() bool { return s.all }

// Empty reports whether the request is allowed on no cluster.
func (s Scope) Empty() bool { return !s.all && len(s.names) == 0 }

// Scope returns the clusters on which the request a, of the identity
// a.GetUser(), is allowed, whatever cluster its context names. A server
// answering on [AllClusters] computes it once per request, then keeps an
// object of cluster c only if Scope.Has(c). It is cheap: a walk over the
// identity's rules.
func (r *Rules) Scope(a authorizer.Attributes) Scope {
	var s Scope
	r.forUser(a.GetUser(), func(ru *rule) bool {
		if a.IsResourceRequest() && !ru.matches(a) || !a.IsResourceRequest() && !discovery(a) {
			return true
		}
		if ru.clusters.all {
			s = Scope{all: true}
			return false
		}
		if s.names == nil {
			s.names = map[string]struct{}{}
		}
		for c := range ru.clusters.names {
			s.names[c] = struct{}{}
		}
		return true
	})
	return s
}

// describe says who asks for what, for reasons and logs.
func describe(a authorizer.Attributes, cluster string) string {
	var b strings.Builder
	if u := a.GetUser(); u != nil {
		fmt.Fprintf(&b, "user %q", u.GetName())
		if g := u.GetGroups(); len(g) > 0 {
			fmt.Fprintf(&b, " (groups %s)", strings.Join(g, ","))
		}
	} else {
		b.WriteString("no user")
	}
	if !a.IsResourceRequest() {
		fmt.Fprintf(&b, " %s %s", a.GetVerb(), a.GetPath())
	} else {
		res := a.GetResource()
		if a.GetAPIGroup() != "" {
			res += "." + a.GetAPIGroup()
		}
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		fmt.Fprintf(&b, " %s %s", a.GetVerb(), res)
		if a.GetName() != "" {
			fmt.Fprintf(&b, " %q", a.GetName())
		}
		if a.GetNamespace() != "" {
			fmt.Fprintf(&b, " in namespace %q", a.GetNamespace())
		} else {
			b.WriteString(" cluster-wide")
		}
	}
	if cluster != "" {
		fmt.Fprintf(&b, " on cluster %q", cluster)
	}
	return b.String()
}
