package chart

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// access is one question to the authorizer: may the subject do verb on
// this resource (subresource, object name) in this namespace ("" is the
// whole cluster)?
type access struct {
	verb        string
	gr          schema.GroupResource
	subresource string
	namespace   string
	name        string
}

func (a access) String() string {
	s := a.verb + " " + a.gr.String()
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.name != "" {
		s += " " + a.name
	}
	if a.namespace == "" {
		return s + " in all namespaces"
	}
	return s + " in namespace " + a.namespace
}

var (
	allVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	readVerbs = []string{"get", "list", "watch"}
	leases    = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

// grants is what a value set should give its ServiceAccount, and all it
// should give.
type grants struct {
	namespaced map[schema.GroupResource]bool
	cluster    map[schema.GroupResource]bool
	// namespaces the namespaced resources may be read in; none means all.
	namespaces []string
	// lease is the leader-election Lease, in leaseNamespace; "" when off.
	lease, leaseNamespace string
}

func grantsOf(t *testing.T, s valueSet) grants {
	v := s.values(t)
	g := grants{namespaced: map[schema.GroupResource]bool{}, cluster: map[schema.GroupResource]bool{}, namespaces: v.Watch.Namespaces}
	for _, r := range v.Watch.Resources {
		g.namespaced[groupOf(r)] = true
	}
	for _, r := range v.Watch.ClusterResources {
		g.cluster[groupOf(r)] = true
	}
	// The CRDs' definitions, for the discovery document's printer
	// columns, when a resource of a group the built-in table does not
	// know is watched.
	builtin := readBuiltinTable(t)
	for _, r := range slices.Concat(v.Watch.Resources, v.Watch.ClusterResources) {
		if _, ok := builtin[groupOf(r).Group]; !ok {
			g.cluster[schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}] = true
		}
	}
	if v.leaderElection() {
		g.lease, g.leaseNamespace = s.fullname, s.namespace
	}
	return g
}

// allows is whether the grants allow a.
func (g grants) allows(a access) bool {
	if a.subresource == "" && slices.Contains(readVerbs, a.verb) {
		if g.cluster[a.gr] {
			return true
		}
		if g.namespaced[a.gr] && (len(g.namespaces) == 0 || slices.Contains(g.namespaces, a.namespace)) {
			return true
		}
	}
	if g.lease != "" && a.gr == leases && a.subresource == "" && a.namespace == g.leaseNamespace {
		switch a.verb {
		case "create":
			return true
		case "get", "update":
			return a.name == g.lease
		}
	}
	return false
}

// apiResource is one resource the API server serves.
type apiResource struct {
	schema.GroupResource
	namespaced   bool
	watchable    bool // has list and watch
	subresources []string
}

// discover lists every resource the API server serves, all versions
// merged.
func discover(t *testing.T, c *cluster) []apiResource {
	t.Helper()
	_, lists, err := c.disc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	byGR := map[schema.GroupResource]*apiResource{}
	var order []schema.GroupResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			name, sub, _ := strings.Cut(r.Name, "/")
			gr := schema.GroupResource{Group: gv.Group, Resource: name}
			e, ok := byGR[gr]
			if !ok {
				e = &apiResource{GroupResource: gr}
				byGR[gr] = e
				order = append(order, gr)
			}
			if sub != "" {
				if !slices.Contains(e.subresources, sub) {
					e.subresources = append(e.subresources, sub)
				}
				continue
			}
			e.namespaced = r.Namespaced
			e.watchable = e.watchable || slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch")
		}
	}
	out := make([]apiResource, 0, len(order))
	for _, gr := range order {
		out = append(out, *byGR[gr])
	}
	return out
}

// questions are what checkRBAC asks about a value set: every verb on every
// resource the server serves and every configured one, in the whole
// cluster, the release namespace, each watched namespace and one nobody
// watches; the subresources of the configured resources; and Leases by
// name.
func questions(s valueSet, g grants, served []apiResource) []access {
	resources := slices.Clone(served)
	for gr := range g.namespaced {
		if !slices.ContainsFunc(resources, func(r apiResource) bool { return r.GroupResource == gr }) {
			resources = append(resources, apiResource{GroupResource: gr, namespaced: true})
		}
	}
	for gr := range g.cluster {
		if !slices.ContainsFunc(resources, func(r apiResource) bool { return r.GroupResource == gr }) {
			resources = append(resources, apiResource{GroupResource: gr})
		}
	}
	// A rule grants every resource it lists in every group it lists: ask
	// for each configured resource in the other configured groups too.
	configured := slices.Concat(slices.Collect(maps.Keys(g.namespaced)), slices.Collect(maps.Keys(g.cluster)))
	for _, a := range configured {
		for _, b := range configured {
			gr := schema.GroupResource{Group: b.Group, Resource: a.Resource}
			if !slices.ContainsFunc(resources, func(r apiResource) bool { return r.GroupResource == gr }) {
				resources = append(resources, apiResource{GroupResource: gr, namespaced: true})
			}
		}
	}
	nsScopes := []string{"", s.namespace, elsewhere}
	for _, ns := range g.namespaces {
		if !slices.Contains(nsScopes, ns) {
			nsScopes = append(nsScopes, ns)
		}
	}

	var qs []access
	for _, r := range resources {
		scopes := []string{""}
		if r.namespaced {
			scopes = nsScopes
		}
		configured := g.namespaced[r.GroupResource] || g.cluster[r.GroupResource]
		for _, ns := range scopes {
			for _, verb := range allVerbs {
				qs = append(qs, access{verb: verb, gr: r.GroupResource, namespace: ns})
			}
			if !configured {
				continue
			}
			for _, sub := range r.subresources {
				for _, verb := range []string{"get", "list", "watch", "create", "update", "patch"} {
					qs = append(qs, access{verb: verb, gr: r.GroupResource, subresource: sub, namespace: ns})
				}
			}
		}
	}
	for _, ns := range []string{s.namespace, elsewhere} {
		for _, name := range []string{s.fullname, "another-lease"} {
			for _, verb := range []string{"get", "update", "patch", "delete"} {
				qs = append(qs, access{verb: verb, gr: leases, namespace: ns, name: name})
			}
		}
	}
	return qs
}

// subject is who asks: a ServiceAccount, with the groups its token carries.
type subject struct {
	user   string
	groups []string
}

func serviceAccount(namespace, name string) subject {
	return subject{
		user:   "system:serviceaccount:" + namespace + ":" + name,
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// can asks the API server's authorizer with a SubjectAccessReview.
func (c *cluster) can(ctx context.Context, who subject, a access) (bool, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   who.user,
		Groups: who.groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace:   a.namespace,
			Verb:        a.verb,
			Group:       a.gr.Group,
			Resource:    a.gr.Resource,
			Subresource: a.subresource,
			Name:        a.name,
		},
	}}
	res, err := c.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("%s: %w", a, err)
	}
	return res.Status.Allowed, nil
}

// canAll asks every question in parallel and returns the answers in order.
func (c *cluster) canAll(ctx context.Context, who subject, qs []access) ([]bool, error) {
	answers := make([]bool, len(qs))
	errs := make([]error, len(qs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				answers[i], errs[i] = c.can(ctx, who, qs[i])
			}
		})
	}
	for i := range qs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return answers, nil
}

// checkRBAC creates the value set's ServiceAccount and RBAC objects for
// real, then asks the authorizer every question of questions() for the
// ServiceAccount and for a ServiceAccount nobody bound (what every
// ServiceAccount may do anyway). The bridge's answers must be the grants,
// plus what everybody may do, and nothing else.
func checkRBAC(t *testing.T, c *cluster, s valueSet) {
	c.createRBAC(t, render(t, s))

	g := grantsOf(t, s)
	bridge := serviceAccount(s.namespace, s.fullname)
	nobody := serviceAccount(elsewhere, "nobody")
	qs := questions(s, g, discover(t, c))

	// The authorizer learns of new bindings through its informers: wait
	// until it allows everything granted.
	var granted []access
	for _, q := range qs {
		if g.allows(q) {
			granted = append(granted, q)
		}
	}
	if len(granted) == 0 {
		t.Fatal("the value set grants nothing")
	}
	var missing []access
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		answers, err := c.canAll(ctx, bridge, granted)
		if err != nil {
			return false, err
		}
		missing = missing[:0]
		for i, ok := range answers {
			if !ok {
				missing = append(missing, granted[i])
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("%s is still denied %d granted accesses (%v), e.g. %v", bridge.user, len(missing), err, missing[:min(5, len(missing))])
	}

	got, err := c.canAll(t.Context(), bridge, qs)
	if err != nil {
		t.Fatal(err)
	}
	base, err := c.canAll(t.Context(), nobody, qs)
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for i, q := range qs {
		granted := g.allows(q)
		if granted && base[i] {
			t.Errorf("every ServiceAccount may %s: the question proves nothing", q)
		}
		if want := granted || base[i]; got[i] != want {
			t.Errorf("%s: %s is %s, want %s", bridge.user, q, verdict(got[i]), verdict(want))
		}
		if got[i] {
			allowed++
		}
	}
	t.Logf("%d questions to the authorizer; %s is allowed %d, of which %d granted by the chart", len(qs), bridge.user, allowed, len(granted))

	checkWithToken(t, c, s, g)
}

func verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// createRBAC creates the ServiceAccount and the RBAC objects among objs
// for real.
func (c *cluster) createRBAC(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	rbacKinds := []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	for _, obj := range objs {
		if !slices.Contains(rbacKinds, obj.GetKind()) {
			continue
		}
		ri, err := c.resourceFor(c.dyn, obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Fatalf("%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
}
