package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/corpus"
)

// customGroup is the API group of the watch-everything scenario's CRDs.
const customGroup = "scale.bench.kubebus.example"

// customResource is a resource a CRD of the scenario defines.
type customResource struct {
	schema.GroupVersionResource
	Kind string
}

// defineCRDs defines n namespaced CRDs in customGroup, serving v1, and
// returns their resources once discovery serves every one of them.
func defineCRDs(ctx context.Context, rc *rest.Config, dyn dynamic.Interface, n int) ([]customResource, error) {
	var out []customResource
	for i := range n {
		plural, kind := fmt.Sprintf("gadgets%02d", i), fmt.Sprintf("Gadget%02d", i)
		gvr := schema.GroupVersionResource{Group: customGroup, Version: "v1", Resource: plural}
		crd := corpus.CRD(gvr, kind, "Namespaced", map[string]any{
			"type": "object",
			"properties": map[string]any{"spec": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"size":  map[string]any{"type": "integer"},
					"color": map[string]any{"type": "string"},
				},
			}},
		})
		if _, err := dyn.Resource(corpus.CRDResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
		out = append(out, customResource{gvr, kind})
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := dc.ServerResourcesForGroupVersion(customGroup + "/v1")
		served := 0
		if err == nil {
			for _, r := range list.APIResources {
				if slices.ContainsFunc(out, func(c customResource) bool { return c.Resource == r.Name }) {
					served++
				}
			}
		}
		if served == n {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("discovery serves %d of the %d CRDs after a minute (%v)", served, n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createCustomObjects creates perResource objects of each of resources,
// with a small spec, spread evenly over namespaces, with writers requests
// in flight. A resource just defined may answer NotFound for a moment:
// such a create is tried again, for up to 30 s.
func createCustomObjects(ctx context.Context, dyn dynamic.Interface, resources []customResource, namespaces []string, perResource, writers int) error {
	return parallel(ctx, len(resources)*perResource, writers, func(i int) error {
		res, j := resources[i/perResource], i%perResource
		ns := namespaces[j%len(namespaces)]
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": res.GroupVersion().String(),
			"kind":       res.Kind,
			"metadata":   map[string]any{"name": fmt.Sprintf("g-%05d", j)},
			"spec":       map[string]any{"size": int64(j), "color": "blue"},
		}}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := dyn.Resource(res.GroupVersionResource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
			if err == nil {
				return nil
			}
			if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
				return fmt.Errorf("create %s %s/%s: %w", res.Resource, ns, obj.GetName(), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}
