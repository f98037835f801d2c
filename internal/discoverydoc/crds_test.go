package discoverydoc

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func crdObject(rv string, columns []any, status string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com", "resourceVersion": rv},
		"spec": map[string]any{"group": "example.com",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{"name": "v1", "schema": map[string]any{"x": rv}, "additionalPrinterColumns": columns}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": status}}},
	}}
}

// An update of a CRD changes the document only when what the document
// takes of it (slimCRD) changed: not its status, resourceVersion or
// schema.
func TestCRDUpdateChangesDocument(t *testing.T) {
	size := []any{map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}}
	colour := []any{map[string]any{"name": "Colour", "type": "string", "jsonPath": ".spec.colour"}}
	for _, tc := range []struct {
		name     string
		old, new *unstructured.Unstructured
		want     bool
	}{
		{"status only", crdObject("1", size, "False"), crdObject("2", size, "True"), false},
		{"columns", crdObject("1", size, "True"), crdObject("2", colour, "True"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, _ := slimCRD(tc.old)
			new, _ := slimCRD(tc.new)
			if got := crdUpdateMatters(old, new); got != tc.want {
				t.Errorf("crdUpdateMatters = %t, want %t", got, tc.want)
			}
		})
	}
}
