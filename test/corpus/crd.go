package corpus

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRD is the definition of the custom resource gvr, of kind and scope
// ("Namespaced" or "Cluster"), serving and storing gvr.Version alone, for
// a dynamic client to create. Its objects are checked against
// openAPIV3Schema; nil takes any fields.
func CRD(gvr schema.GroupVersionResource, kind, scope string, openAPIV3Schema map[string]any) *unstructured.Unstructured {
	if openAPIV3Schema == nil {
		openAPIV3Schema = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{
			"group": gvr.Group,
			"scope": scope,
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": gvr.Resource, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": gvr.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": openAPIV3Schema},
			}},
		},
	}}
}
