package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// listable is every resource the API server serves that supports list
// and watch, at the version discovery prefers, read from the discovery
// documents themselves (/api/v1, /apis and each /apis/<group>/<version>),
// minus secrets and the default exclusions: what BRIDGE_RESOURCES=*
// must watch, as `kubectl api-resources --verbs=list,watch` lists it.
func listable(t *testing.T, c *corpus.Client) map[string]source.Resource {
	t.Helper()
	get := func(path string, into any) {
		t.Helper()
		body, _, err := c.Do(http.MethodGet, path, nil, http.StatusOK)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	type groupVersion struct{ path, group, version string }
	gvs := []groupVersion{{"/api/v1", "", "v1"}}
	preferred := map[string]string{"": "v1"}
	var groups metav1.APIGroupList
	get("/apis", &groups)
	for _, g := range groups.Groups {
		preferred[g.Name] = g.PreferredVersion.Version
		for _, v := range g.Versions {
			gvs = append(gvs, groupVersion{"/apis/" + g.Name + "/" + v.Version, g.Name, v.Version})
		}
	}
	excluded := []string{"secrets", "events", "events.events.k8s.io", "leases.coordination.k8s.io"}
	out := map[string]source.Resource{}
	for _, gv := range gvs {
		var list metav1.APIResourceList
		get(gv.path, &list)
		for _, r := range list.APIResources {
			res := source.Resource{GroupVersionResource: schema.GroupVersionResource{Group: gv.group, Version: gv.version, Resource: r.Name},
				Kind: r.Kind, Namespaced: r.Namespaced}
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") ||
				slices.Contains(excluded, res.Name()) {
				continue
			}
			// The preferred version wins; a resource served only at
			// other versions is taken at the first of them.
			if had, ok := out[res.Name()]; !ok || (gv.version == preferred[gv.group] && had.Version != gv.version) {
				out[res.Name()] = res
			}
		}
	}
	return out
}

// BRIDGE_RESOURCES=* watches exactly what the API server serves that
// supports list and watch, minus secrets and the exclusions, at the
// preferred versions, and publishes objects of every one of them (the
// corpus holds an object of every built-in kind).
func TestWatchEverythingWatchesEveryListableResource(t *testing.T) {
	c := corpus.NewClient(t, cp.RESTConfig())
	c.CreateEverything(t, true)
	srv := natstest.Start(t, natstest.Options{})
	env := natsEnv(srv, "", map[string]string{"BRIDGE_RESOURCES": "*"})
	delete(env, "BRIDGE_NAMESPACES")
	m := metrics.New()
	r := startBridgeWith(t, env, bridge.WithMetrics(m))

	// The resources watched: those whose informer reports, and the
	// versions the bridge logged for them.
	var want map[string]source.Resource
	poll.Until(t, 30*time.Second, func() (bool, string) {
		want = listable(t, c)
		got := slices.Sorted(maps.Keys(seriesOf(t, m, "bridge_informer_synced", "resource")))
		wantNames := slices.Sorted(maps.Keys(want))
		return slices.Equal(got, wantNames), fmt.Sprintf("watched %d resources, want %d: only watched %v, not watched %v",
			len(got), len(wantNames), minus(got, wantNames), minus(wantNames, got))
	})
	for name, res := range want {
		if !strings.Contains(r.logs.String(), "msg=watching resource="+name+" version="+res.Version+" ") {
			t.Errorf("%s not watched at version %s, the preferred one", name, res.Version)
		}
	}
	t.Logf("%d resources watched", len(want))

	// At least one object of each on the bus.
	nc := srv.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subjects := func() []string {
		st, err := js.Stream(t.Context(), "KUBE")
		if err != nil {
			return nil // not made yet
		}
		info, err := st.Info(t.Context(), jetstream.WithSubjectFilter("kube.e2e.>"))
		if err != nil {
			t.Fatal(err)
		}
		return slices.Collect(maps.Keys(info.State.Subjects))
	}
	has := func(subjects []string, gvr schema.GroupVersionResource) bool {
		group := wire.CoreGroupToken
		if gvr.Group != "" {
			group = wire.EscapeToken(gvr.Group)
		}
		prefix := "kube.e2e." + group + "." + gvr.Version + "." + gvr.Resource + "."
		return slices.ContainsFunc(subjects, func(s string) bool { return strings.HasPrefix(s, prefix) })
	}
	poll.Until(t, 60*time.Second, func() (bool, string) {
		subjects := subjects()
		var missing []string
		for name, res := range want {
			if !has(subjects, res.GroupVersionResource) {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		return len(missing) == 0, fmt.Sprintf("no object on the bus of %v", missing)
	})
	// Never secrets, nor what is excluded, though the corpus has some.
	subs := subjects()
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "events"},
		{Group: "events.k8s.io", Version: "v1", Resource: "events"}, {Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	} {
		if has(subs, gvr) {
			t.Errorf("%s published", gvr.GroupResource())
		}
	}
}

// minus is what a has that b has not.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
