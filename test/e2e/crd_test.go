package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/test/poll"
)

// createCRD defines <plural>.example.com at v1alpha1 and waits until the
// API server serves it.
func createCRD(t *testing.T, plural, kind, scope string) schema.GroupVersionResource {
	t.Helper()
	return createCRDAt(t, "example.com", plural, kind, scope, "v1alpha1")
}

// createCRDAt defines <plural>.<group> serving only version and waits
// until the API server serves it (discovery shows it). It is deleted when
// the test ends, unless the test deleted it.
func createCRDAt(t *testing.T, group, plural, kind, scope, version string) schema.GroupVersionResource {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crd := corpus.CRD(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}, kind, scope, nil)
	if _, err := dyn.Resource(corpus.CRDResource).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", crd.GetName(), err)
	}
	// Gone when the test ends (a test may have deleted it already), so
	// that the test can run again against the same control plane.
	t.Cleanup(func() {
		_ = dyn.Resource(corpus.CRDResource).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		list, err := dc.ServerResourcesForGroupVersion(group + "/" + version)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range list.APIResources {
			if r.Name == plural {
				return true, ""
			}
		}
		return false, plural + " not in discovery yet"
	})
	return schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
}

// CRDs are watched by their plural.group name, namespaced or
// cluster-scoped, and by plural.version.group.
func TestCustomResources(t *testing.T) {
	widgets := createCRD(t, "widgets", "Widget", "Namespaced")
	gadgets := createCRD(t, "gadgets", "Gadget", "Cluster")
	ns := namespace(t, "crd")
	s := &sinktest.Recorder{}
	b := startBridge(t, map[string]string{
		"BRIDGE_RESOURCES":  "widgets.example.com,gadgets.v1alpha1.example.com",
		"BRIDGE_NAMESPACES": ns,
	}, s)

	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"}, "spec": map[string]any{"size": int64(3)},
	}}
	gotW, err := dyn.Resource(widgets).Namespace(ns).Create(t.Context(), w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1alpha1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g1"},
	}}
	gotG, err := dyn.Resource(gadgets).Create(t.Context(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	poll.Until(t, 30*time.Second, func() (bool, string) {
		return s.Len() >= 2, fmt.Sprintf("%d of 2 messages", s.Len())
	})
	b.stop(t)
	got := byKey(s.Accepted())
	if len(s.Accepted()) != 2 {
		t.Errorf("%d messages, want 2", len(s.Accepted()))
	}
	for key, want := range map[string]struct{ kind, rv, source string }{
		ns + "/w1": {"Widget", gotW.GetResourceVersion(), "/clusters/default/apis/example.com/v1alpha1/widgets"},
		"g1":       {"Gadget", gotG.GetResourceVersion(), "/clusters/default/apis/example.com/v1alpha1/gadgets"},
	} {
		msgs := got[key]
		if len(msgs) != 1 {
			t.Errorf("%s: %d messages, want 1", key, len(msgs))
			continue
		}
		m := msgs[0]
		if m.Action != "added" || m.Kind != want.kind || m.ResourceVersion != want.rv || m.Source != want.source || m.APIVersion != "example.com/v1alpha1" {
			t.Errorf("%s: %s kind=%s rv=%s source=%s apiversion=%s; want added %s at %s from %s",
				key, m.Action, m.Kind, m.ResourceVersion, m.Source, m.APIVersion, want.kind, want.rv, want.source)
		}
	}
}
