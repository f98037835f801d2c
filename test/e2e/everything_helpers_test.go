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

	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/sink"
)

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// defineCRD defines <plural>.<group>, namespaced, serving version only,
// and returns when discovery serves it. It is deleted when the test ends,
// unless the test deleted it.
func defineCRD(t *testing.T, group, plural, kind, version string) schema.GroupVersionResource {
	t.Helper()
	dyn := dynamicClient(t)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": plural, "kind": kind},
			"versions": []any{map[string]any{
				"name": version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", crd.GetName(), err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
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

// createObjects creates n objects of gvr, of kind, in ns, named
// <prefix>-<i>.
func createObjects(t *testing.T, gvr schema.GroupVersionResource, kind, ns, prefix string, n int) {
	t.Helper()
	dyn := dynamicClient(t)
	for i := range n {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i)},
			"spec":     map[string]any{"i": int64(i)},
		}}
		// A resource just defined may take a moment to accept objects.
		eventually(t, 30*time.Second, func() (bool, string) {
			_, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
}

// actions counts msgs by action.
func actions(msgs []*sink.Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[m.Action]++
	}
	return out
}

// seriesOf is the value of each series of the counter or gauge name in
// m's registry, by the value of its label; "" keys a series without it.
func seriesOf(t *testing.T, m *metrics.Metrics, name, label string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == label {
					key = l.GetValue()
				}
			}
			switch {
			case s.Counter != nil:
				out[key] = s.GetCounter().GetValue()
			case s.Gauge != nil:
				out[key] = s.GetGauge().GetValue()
			}
		}
	}
	return out
}
