package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/corpus"
)

// watchAllInstall is one install of the watch-all value set, with more
// values, and what it should let its ServiceAccount read beyond what "*"
// selects in the readable groups.
type watchAllInstall struct {
	release    string
	args       []string
	namespaces []string                      // watch.namespaces
	named      map[schema.GroupResource]bool // named in watch.resources or watch.clusterResources
}

// checkWatchAll installs CRDs in an extra group and in a group nobody
// lists, then installs the watch-all value set three ways (as it is, with
// secrets named, and limited to a namespace) and, with a token of each
// ServiceAccount, lists and watches every resource discovery shows that
// can be listed and watched: allowed exactly for what "*" selects (minus
// the exclusions and secrets) in the built-in and the extra groups, plus
// what is named; forbidden for the rest, secrets included.
func checkWatchAll(t *testing.T, c *cluster, kubeconfig string) {
	v := readWatchAllValues(t)
	extra := v.Watch.ExtraGroups[0]
	gadgets := c.installCRD(t, extra, "gadgets", "Gadget", "Namespaced")
	clusterGadgets := c.installCRD(t, extra, "clustergadgets", "ClusterGadget", "Cluster")
	others := c.installCRD(t, "unlisted.example.org", "others", "Other", "Namespaced")

	const team = "team-w"
	c.createNamespaces(t, watchAll.namespace, team)
	for _, gr := range []schema.GroupResource{gadgets, others} {
		c.createObject(t, gr, team, "one")
	}
	c.createObject(t, clusterGadgets, "", "one")

	t.Run("dry-run", func(t *testing.T) { dryRun(t, c, watchAll) })
	t.Run("helm-install", func(t *testing.T) {
		notes := helmInstall(t, kubeconfig, watchAll)
		for _, want := range []string{"every resource the API server serves that can be listed and watched", "except secrets and " + strings.Join(v.Watch.Exclude, ", "), extra} {
			if !strings.Contains(notes, want) {
				t.Errorf("NOTES lack %q:\n%s", want, notes)
			}
		}
	})

	served := discover(t, c)
	for _, in := range []watchAllInstall{
		{release: "everything"},
		{release: "vault", args: []string{"--set", "watch.resources={secrets}"},
			named: map[schema.GroupResource]bool{{Resource: "secrets"}: true}},
		{release: "tenant", args: []string{"--set", "watch.namespaces={" + team + "}", "--set", "watch.clusterResources={" + clusterGadgets.String() + "}"},
			namespaces: []string{team}, named: map[schema.GroupResource]bool{clusterGadgets: true}},
	} {
		t.Run("token/"+in.release, func(t *testing.T) { checkWatchAllToken(t, c, v, served, in, gadgets) })
	}
}

// checkWatchAllToken is checkWatchAll for one install.
func checkWatchAllToken(t *testing.T, c *cluster, v watchAllValues, served []apiResource, in watchAllInstall, gadgets schema.GroupResource) {
	s := watchAll
	s.release, s.fullname = in.release, in.release+"-bridge"
	c.createRBAC(t, render(t, s, in.args...))
	cfg := c.tokenConfig(t, s.namespace, s.fullname)
	cfg.WarningHandler = rest.NoWarnings{} // v1 Endpoints is deprecated, and listed here on purpose
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	table := readBuiltinTable(t)
	readable := func(group string) bool {
		_, builtin := table[group]
		return builtin || slices.Contains(v.Watch.ExtraGroups, group)
	}
	type request struct {
		gr        schema.GroupResource
		namespace string // "": all namespaces, or cluster-scoped
		allowed   bool
	}
	var requests []request
	selected := 0
	for _, r := range served {
		if !r.watchable {
			continue
		}
		star := r.GroupResource != schema.GroupResource{Resource: "secrets"} && !excludedBy(v.Watch.Exclude, r.GroupResource)
		if star {
			selected++
		}
		want := in.named[r.GroupResource] || star && readable(r.Group)
		switch {
		case !r.namespaced && len(in.namespaces) > 0:
			// A ClusterRole cannot grant an extra group's cluster-scoped
			// resources without its namespaced ones: they must be named.
			_, builtin := table[r.Group]
			want = in.named[r.GroupResource] || want && builtin
			requests = append(requests, request{r.GroupResource, "", want})
		case !r.namespaced:
			requests = append(requests, request{r.GroupResource, "", want})
		case len(in.namespaces) > 0:
			requests = append(requests, request{r.GroupResource, in.namespaces[0], want}, request{r.GroupResource, "", false}, request{r.GroupResource, elsewhere, false})
		default:
			requests = append(requests, request{r.GroupResource, "", want}, request{r.GroupResource, elsewhere, want})
		}
	}

	client := func(r request) (dynamic.ResourceInterface, error) {
		gvr, err := c.mapper.ResourceFor(r.gr.WithVersion(""))
		if err != nil {
			return nil, err
		}
		if r.namespace == "" {
			return dyn.Resource(gvr), nil
		}
		return dyn.Resource(gvr).Namespace(r.namespace), nil
	}
	where := func(r request) string {
		if r.namespace == "" {
			return r.gr.String()
		}
		return r.gr.String() + " in namespace " + r.namespace
	}

	// The authorizer learns of the new bindings through its informers:
	// wait until every allowed list is allowed.
	var denied []string
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		denied = denied[:0]
		for _, r := range requests {
			if !r.allowed {
				continue
			}
			ri, err := client(r)
			if err != nil {
				return false, err
			}
			if _, err := ri.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				denied = append(denied, fmt.Sprintf("%s: %v", where(r), err))
			}
		}
		return len(denied) == 0, nil
	})
	if err != nil {
		t.Fatalf("%d lists the ServiceAccount should be allowed still fail (%v): %v", len(denied), err, denied[:min(5, len(denied))])
	}

	allowed := 0
	for _, r := range requests {
		ri, err := client(r)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ri.List(t.Context(), metav1.ListOptions{Limit: 1})
		expectVerdict(t, "list "+where(r), err, r.allowed)
		w, err := ri.Watch(t.Context(), metav1.ListOptions{})
		if err == nil {
			w.Stop()
		}
		expectVerdict(t, "watch "+where(r), err, r.allowed)
		if r.allowed {
			allowed++
		}
	}
	if selected == 0 || allowed == 0 {
		t.Fatalf("nothing selected (%d) or allowed (%d): the check proves nothing", selected, allowed)
	}

	// What is listed and watched is the objects: the extra group's CRD.
	ns := "team-w"
	ri, err := client(request{gr: gadgets, namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	list, err := ri.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "one" {
		t.Errorf("the ServiceAccount lists %d %s in %s, want the one created", len(list.Items), gadgets, ns)
	}
	// A watch from no resourceVersion begins with the objects there are.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := ri.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		obj, ok := e.Object.(*unstructured.Unstructured)
		if e.Type != watch.Added || !ok || obj.GetName() != "one" {
			t.Errorf("the ServiceAccount's watch of %s in %s begins with %s %v, want ADDED one", gadgets, ns, e.Type, e.Object)
		}
	case <-ctx.Done():
		t.Errorf("the ServiceAccount's watch of %s in %s gave nothing", gadgets, ns)
	}
	t.Logf("%s: %d resources served that can be listed and watched, %d selected by *, %d list and watch requests allowed of %d", s.fullname, countWatchable(served), selected, allowed, len(requests))
}

func countWatchable(served []apiResource) int {
	n := 0
	for _, r := range served {
		if r.watchable {
			n++
		}
	}
	return n
}

// expectVerdict: err is nil when allowed, and Forbidden when not.
func expectVerdict(t *testing.T, what string, err error, allowed bool) {
	t.Helper()
	switch {
	case allowed && err != nil:
		t.Errorf("%s with the ServiceAccount's token: %v", what, err)
	case !allowed && !apierrors.IsForbidden(err):
		t.Errorf("%s with the ServiceAccount's token: got %v, want Forbidden", what, err)
	}
}

// installCRD installs a CRD of group with any fields, and returns once the
// API server serves it.
func (c *cluster) installCRD(t *testing.T, group, plural, kind, scope string) schema.GroupResource {
	t.Helper()
	crd := corpus.CRD(schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}, kind, scope, nil)
	crds := c.dyn.Resource(corpus.CRDResource)
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("CRD %s: %v", crd.GetName(), err)
	}
	gr := schema.GroupResource{Group: group, Resource: plural}
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c.mapper.Reset()
		_, err := c.mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			return false, nil
		}
		// Served in discovery, and its objects can be listed.
		_, err = c.dyn.Resource(gr.WithVersion("v1")).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server does not serve %s: %v", gr, err)
	}
	return gr
}

// createObject creates an object of a CRD installCRD installed.
func (c *cluster) createObject(t *testing.T, gr schema.GroupResource, namespace, name string) {
	t.Helper()
	gvk, err := c.mapper.KindFor(gr.WithVersion(""))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   map[string]any{"name": name},
	}}
	var ri dynamic.ResourceInterface = c.dyn.Resource(gr.WithVersion(gvk.Version))
	if namespace != "" {
		obj.SetNamespace(namespace)
		ri = c.dyn.Resource(gr.WithVersion(gvk.Version)).Namespace(namespace)
	}
	if _, err := ri.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s %s/%s: %v", gr, namespace, name, err)
	}
}
