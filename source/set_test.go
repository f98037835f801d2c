package source

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// stoppable is a member whose Source is not run: stopping it records the
// cause and marks it done.
func stoppable(s *Set, res Resource) (m *member, cause func() error) {
	m = s.newMember(res, false)
	var mu sync.Mutex
	var got error
	m.stop = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if got == nil {
			got = err
			close(m.done)
		}
	}
	return m, func() error { mu.Lock(); defer mu.Unlock(); return got }
}

// crdObject is a CRD as the follower's informer holds it.
func crdObject(gr schema.GroupResource, served, established bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"group": gr.Group, "names": map[string]any{"plural": gr.Resource},
			"versions": []any{map[string]any{"name": "v1", "served": served}}},
	}}
	u.SetName(gr.String())
	if established {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Established", "status": "True"}}, "status", "conditions")
	}
	return u
}

// followerOf is a follower whose CRD informer holds crds.
func followerOf(t *testing.T, crds ...*unstructured.Unstructured) *follower {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	f := &follower{crds: store, defined: map[schema.GroupResource]bool{}}
	for _, c := range crds {
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
		f.define(c)
	}
	return f
}

func discoveryOf(lists ...*metav1.APIResourceList) *fake.FakeDiscovery {
	return &fake.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}
}

var lw = []string{"list", "watch"}

// reselect stops a resource only when discovery and the CRDs agree it is
// gone, and watches one served at another preferred version there.
func TestSetReselectGoneAndMoved(t *testing.T) {
	gizmos := Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}, Kind: "Gizmo"}
	doodads := Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "doodads"}, Kind: "Doodad"}
	disc := discoveryOf(&metav1.APIResourceList{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: lw},
	}})
	sel, err := NewSelection([]string{"*.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prepared := map[string]bool{}
	s := NewSet(nil, disc, SetOptions{Selection: sel, Prepare: func(_ context.Context, res Resource) error {
		prepared[res.Name()+"/"+res.Version] = true
		return context.Canceled // not started: this test is about what is stopped
	}}, nil, nil, slog.New(slog.DiscardHandler))
	// Discovery lags: gizmos' CRD is served, and discovery does not show it
	// yet (or any more); doodads' CRD is gone, and so is it from discovery.
	s.follow = followerOf(t, crdObject(gizmos.GroupResource(), true, true), crdObject(doodads.GroupResource(), true, true))
	if err := s.follow.crds.Delete(crdObject(doodads.GroupResource(), true, true)); err != nil {
		t.Fatal(err)
	}
	w, wStop := stoppable(s, widgets)
	g, gStop := stoppable(s, gizmos)
	d, dStop := stoppable(s, doodads)
	for _, m := range []*member{w, g, d} {
		s.members[m.res.GroupResource()] = m
	}
	var wg sync.WaitGroup
	s.reselect(t.Context(), &wg)
	wg.Wait()

	if err := gStop(); err != nil {
		t.Errorf("gizmos, served by its CRD while discovery lags, stopped with %v; want kept", err)
	}
	if _, ok := s.members[gizmos.GroupResource()]; !ok {
		t.Error("gizmos no longer a member; want kept while its CRD is served")
	}
	if err := dStop(); err != errRetired {
		t.Errorf("doodads, gone from discovery and CRDs, stopped with %v; want errRetired", err)
	}
	if err := wStop(); err != errReplaced {
		t.Errorf("widgets, served at v2 only, stopped with %v; want errReplaced", err)
	}
	if !prepared["widgets.example.com/v2"] {
		t.Errorf("widgets not prepared at v2: prepared %v", prepared)
	}
}
