package metrics

import (
	"maps"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/source"
)

// series gathers m's series of the metric name as "label=value,...": value,
// labels sorted by name.
func series(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[strings.Join(labels, ",")] = s.GetCounter().GetValue()
		}
		return out
	}
	t.Fatalf("%s is not registered", name)
	return nil
}

// The view's counters are in the registry under their documented names
// and labels, at 0 for a resource once it is announced, and count what
// they are told.
func TestViewMetrics(t *testing.T) {
	m := New()
	m.ViewResource("configmaps")
	m.ViewResource("pods")
	m.FilterError("pods")
	m.FilterError("pods")
	m.FilterError("deployments.apps")
	pods := source.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
	deployments := source.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}
	m.Suppressed(pods, source.NotInView)
	m.Suppressed(pods, source.ProjectionUnchanged)
	m.Suppressed(pods, source.ProjectionUnchanged)
	m.Suppressed(deployments, source.ProjectionUnchanged)

	for name, want := range map[string]map[string]float64{
		"bridge_filter_errors_total": {
			"resource=configmaps":       0,
			"resource=pods":             2,
			"resource=deployments.apps": 1,
		},
		"bridge_view_suppressed_total": {
			"reason=filtered,resource=configmaps":        0,
			"reason=unchanged,resource=configmaps":       0,
			"reason=filtered,resource=pods":              1,
			"reason=unchanged,resource=pods":             2,
			"reason=unchanged,resource=deployments.apps": 1,
		},
	} {
		if got := series(t, m, name); !maps.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
}

func TestBuildInfo(t *testing.T) {
	m := New()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "bridge_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("bridge_build_info: %v, want one series at 1", f.GetMetric())
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["goversion"] == "" || labels["version"] == "" {
			t.Errorf("bridge_build_info labels %v: want the Go version and the module version", labels)
		}
		return
	}
	t.Fatal("no bridge_build_info")
}
