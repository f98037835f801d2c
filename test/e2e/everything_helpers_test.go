package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return dyn
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
		poll.Until(t, 30*time.Second, func() (bool, string) {
			_, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
}

// actions counts msgs by action.
func actions(msgs []*wire.Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[m.Action]++
	}
	return out
}

// seriesOf is the value of each series of the counter or gauge name in
// m's registry, read in this process, by the value of its label; "" keys
// a series without it. A series missing is missing from the map.
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
