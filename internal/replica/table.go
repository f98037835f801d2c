package replica

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kubebus/bridge/wire"
)

// The columns of a table (kubectl get): a CRD's table is the API server's
// own (apiextensions-apiserver's tableconvertor): NAME, then its
// additionalPrinterColumns as its bridge published them, and no AGE
// unless a column is one. Any other kind's table is NAME, the short set
// builtinColumns names for a few built-in kinds, and AGE. A column of
// priority 1 is shown by kubectl only with -o wide. The all-clusters view
// adds a CLUSTER column first.

// builtinColumns are the columns of the built-in kinds the replica knows,
// by group/kind: each a JSONPath into the object. They are a short,
// fixed set, not the API server's full printers (which compute values,
// such as a pod's READY count, from several fields).
var builtinColumns = map[string][]wire.PrinterColumn{
	"/Pod": {
		{Name: "Status", Type: "string", JSONPath: ".status.phase"},
		{Name: "Node", Type: "string", JSONPath: ".spec.nodeName", Priority: 1},
		{Name: "IP", Type: "string", JSONPath: ".status.podIP", Priority: 1},
	},
	"/ConfigMap": {
		{Name: "Data", Type: "integer", JSONPath: ".data", Format: "count"},
	},
	"/Secret": {
		{Name: "Type", Type: "string", JSONPath: ".type"},
	},
	"/Service": {
		{Name: "Type", Type: "string", JSONPath: ".spec.type"},
		{Name: "Cluster-IP", Type: "string", JSONPath: ".spec.clusterIP"},
		{Name: "Selector", Type: "string", JSONPath: ".spec.selector", Priority: 1},
	},
	"/Node": {
		{Name: "Kubelet", Type: "string", JSONPath: ".status.nodeInfo.kubeletVersion"},
		{Name: "Internal-IP", Type: "string", JSONPath: ".status.addresses[?(@.type==\"InternalIP\")].address", Priority: 1},
	},
	"/Namespace": {
		{Name: "Status", Type: "string", JSONPath: ".status.phase"},
	},
	"apps/Deployment": {
		{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas"},
		{Name: "Desired", Type: "integer", JSONPath: ".spec.replicas"},
		{Name: "Available", Type: "integer", JSONPath: ".status.availableReplicas"},
	},
	"apps/StatefulSet": {
		{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas"},
		{Name: "Desired", Type: "integer", JSONPath: ".spec.replicas"},
	},
	"apps/DaemonSet": {
		{Name: "Desired", Type: "integer", JSONPath: ".status.desiredNumberScheduled"},
		{Name: "Ready", Type: "integer", JSONPath: ".status.numberReady"},
	},
}

// newTableConvertor makes the tables of r's objects, with a CLUSTER
// column first for the all-clusters view.
func newTableConvertor(r wire.DiscoveredResource, allClusters bool) rest.TableConvertor {
	tc := resourceTable(r)
	if allClusters {
		return clusterColumn{tc}
	}
	return tc
}

// resourceTable makes the tables of r's objects: its printer columns, or
// a built-in kind's.
func resourceTable(r wire.DiscoveredResource) rest.TableConvertor {
	if len(r.Columns) == 0 {
		return newBuiltinTable(builtinColumns[r.Group+"/"+r.Kind])
	}
	defs := make([]apiextensionsv1.CustomResourceColumnDefinition, 0, len(r.Columns))
	for _, c := range r.Columns {
		defs = append(defs, apiextensionsv1.CustomResourceColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority, JSONPath: c.JSONPath,
		})
	}
	tc, err := tableconvertor.New(defs)
	if err != nil {
		// A column that does not parse: the API server refuses such a
		// CRD, so its bridge published it from an older API server;
		// NAME and AGE rather than no table.
		return newBuiltinTable(nil)
	}
	return tc
}

// clusterColumn adds the CLUSTER column to the tables of a convertor.
type clusterColumn struct{ rest.TableConvertor }

func (c clusterColumn) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	t, err := c.TableConvertor.ConvertToTable(ctx, obj, opts)
	if err != nil {
		return nil, err
	}
	if t.ColumnDefinitions != nil {
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition{clusterColumnDef}, t.ColumnDefinitions...)
	}
	for i := range t.Rows {
		var cluster any
		if m, err := meta.Accessor(t.Rows[i].Object.Object); err == nil {
			cluster = m.GetAnnotations()[AnnotationCluster]
		}
		t.Rows[i].Cells = append([]any{cluster}, t.Rows[i].Cells...)
	}
	return t, nil
}

var clusterColumnDef = metav1.TableColumnDefinition{Name: "Cluster", Type: "string", Description: "The cluster the object is from."}

// tableConvertor makes tables of one resource's objects.
type tableConvertor struct {
	defs  []metav1.TableColumnDefinition
	paths []*jsonpath.JSONPath // nil for a column whose path does not parse
	cols  []wire.PrinterColumn
}

func newBuiltinTable(columns []wire.PrinterColumn) *tableConvertor {
	t := &tableConvertor{}
	t.defs = append(t.defs, metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]})
	for _, c := range columns {
		if c.JSONPath == ".metadata.creationTimestamp" {
			continue // AGE is always there
		}
		p := jsonpath.New(c.Name).AllowMissingKeys(true)
		if err := p.Parse(fmt.Sprintf("{%s}", c.JSONPath)); err != nil {
			p = nil
		}
		typ := c.Type
		if c.Format == "count" {
			typ = "integer"
		}
		format := c.Format
		if format == "count" {
			format = ""
		}
		t.defs = append(t.defs, metav1.TableColumnDefinition{Name: c.Name, Type: typ, Format: format, Description: c.Description, Priority: c.Priority})
		t.paths = append(t.paths, p)
		t.cols = append(t.cols, c)
	}
	t.defs = append(t.defs, metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]})
	return t
}

func (t *tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if o, ok := opts.(*metav1.TableOptions); !ok || !o.NoHeaders {
		table.ColumnDefinitions = t.defs
	}
	var items []*unstructured.Unstructured
	switch o := obj.(type) {
	case *unstructured.UnstructuredList:
		table.ResourceVersion = o.GetResourceVersion()
		table.Continue = o.GetContinue()
		table.RemainingItemCount = o.GetRemainingItemCount()
		for i := range o.Items {
			items = append(items, &o.Items[i])
		}
	case *unstructured.Unstructured:
		table.ResourceVersion = o.GetResourceVersion()
		items = append(items, o)
	default:
		if m, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
		return nil, fmt.Errorf("replica: no table of %T", obj)
	}
	table.Rows = make([]metav1.TableRow, 0, len(items))
	now := time.Now()
	for _, u := range items {
		cells := make([]any, 0, len(t.defs))
		cells = append(cells, u.GetName())
		for i, p := range t.paths {
			cells = append(cells, cell(p, t.cols[i], u.Object))
		}
		age := "<unknown>"
		if ts := u.GetCreationTimestamp(); !ts.IsZero() {
			age = duration.HumanDuration(now.Sub(ts.Time))
		}
		cells = append(cells, age)
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: u}})
	}
	return table, nil
}

// cell is the value of column c in obj: nil when missing.
func cell(p *jsonpath.JSONPath, c wire.PrinterColumn, obj map[string]any) any {
	if p == nil {
		return nil
	}
	results, err := p.FindResults(obj)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		if c.Format == "count" {
			return int64(0)
		}
		return nil
	}
	v := results[0][0].Interface()
	if c.Format == "count" {
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Map, reflect.Slice, reflect.String:
			return int64(rv.Len())
		}
		return int64(0)
	}
	switch v.(type) {
	case string, int64, float64, bool:
		return v
	}
	var buf bytes.Buffer
	if err := p.PrintResults(&buf, results[0]); err != nil {
		return nil
	}
	return buf.String()
}
