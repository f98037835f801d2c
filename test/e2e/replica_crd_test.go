package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// printerColumns are the additionalPrinterColumns of the CRD of
// TestReplicaCRDColumns: of each type, one shown only with -o wide.
var printerColumns = []any{
	map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
	map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
	map[string]any{"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
	map[string]any{"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": int64(1)},
}

// A CRD's additionalPrinterColumns, published by the
// real bridge in its discovery document, make the replica's table:
// kubectl get (-o wide) through the replica prints exactly what it prints
// against the API server: header, names and every column's values, and
// no AGE, which the API server leaves out of a CRD's table when it has
// columns.
func TestReplicaCRDColumns(t *testing.T) {
	ns := namespace(t, "replica-crd")
	group := strings.ReplaceAll(ns, "-", "") + ".example.com"
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crd := corpus.CRD(gvr, "Widget", "Namespaced", nil)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	versions[0].(map[string]any)["additionalPrinterColumns"] = printerColumns
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(corpus.CRDResource).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(corpus.CRDResource).Delete(t.Context(), crd.GetName(), metav1.DeleteOptions{})
	})
	real := cp.KubeconfigPath()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		_, err := kubectl(t, real, "get", "widgets."+group, "-n", ns)
		return err == nil, fmt.Sprint(err)
	})
	for i, w := range []struct {
		size  int64
		color string
		ready bool
		ratio float64
	}{{3, "red", true, 0.5}, {12, "blue", false, 1.25}, {0, "", true, 2}} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%d", i)},
			"spec":     map[string]any{"size": w.size, "color": w.color, "ratio": w.ratio},
			"status":   map[string]any{"ready": w.ready},
		}}
		if w.color == "" {
			unstructured.RemoveNestedField(obj.Object, "spec", "color")
		}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	srv := natstest.Start(t, natstest.Options{})
	env := natsEnv(srv, ns, map[string]string{"BRIDGE_NATS_LAYOUT": string(natssink.LayoutState), "BRIDGE_CHECKPOINT": "nats-kv:ckpt-" + ns, "BRIDGE_RESOURCES": "widgets." + group})
	p := startProc(t, procEnv(env), filepath.Join(t.TempDir(), "stdout"))
	t.Cleanup(func() { p.terminate(t) })
	r := startReplica(t, map[string]string{"REPLICA_BUS": "nats", "REPLICA_NATS_URL": srv.URL()})
	r.untilServed(t, "e2e", replicaToken, gvr)
	kc := r.kubeconfig(t, "e2e")

	for _, args := range [][]string{{"-o", "wide"}, {}} {
		get := append([]string{"get", "widgets." + group, "-n", ns}, args...)
		poll.Until(t, 30*time.Second, func() (bool, string) {
			want, err := kubectl(t, real, get...)
			if err != nil {
				return false, err.Error()
			}
			got, err := kubectl(t, kc, get...)
			if err != nil {
				return false, err.Error()
			}
			return got == want, fmt.Sprintf("kubectl %s: the replica prints\n%s\nthe API server\n%s", strings.Join(get, " "), got, want)
		})
	}
}
