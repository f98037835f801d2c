package replica

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/wire"
)

// The all-clusters view's tables have the CLUSTER column first, with each
// row's cluster, whether the resource's columns are built in or its own.
func TestAllClustersTableHasClusterFirst(t *testing.T) {
	crd := wire.DiscoveredResource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget",
		Columns: []wire.PrinterColumn{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}}}
	for _, res := range []wire.DiscoveredResource{cmResource, crd} {
		t.Run(res.Kind, func(t *testing.T) {
			u := tagged(cm("a", 1, "10"), "two", "m1.e30")
			table, err := newTableConvertor(res, true).ConvertToTable(t.Context(), &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*u}}, &metav1.TableOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(table.ColumnDefinitions) < 2 || table.ColumnDefinitions[0].Name != "Cluster" || table.ColumnDefinitions[1].Name != "Name" {
				t.Errorf("columns %v, want Cluster then Name", table.ColumnDefinitions)
			}
			if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) || table.Rows[0].Cells[0] != "two" {
				t.Errorf("rows %v, want one row of %d cells, cluster two first", table.Rows, len(table.ColumnDefinitions))
			}
		})
	}
}
