package metrics

import (
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/source"
)

// Each answer 429 is counted once, by resource and verb.
func TestThrottledCountsByResourceAndVerb(t *testing.T) {
	m := New()
	cms := source.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	deploys := source.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}
	m.Throttled(cms, source.VerbList)
	m.Throttled(cms, source.VerbList)
	m.Throttled(cms, source.VerbWatch)
	m.Throttled(deploys, source.VerbWatch)
	want := map[string]float64{
		"resource=configmaps,verb=list":        2,
		"resource=configmaps,verb=watch":       1,
		"resource=deployments.apps,verb=watch": 1,
	}
	if got := series(t, m, "bridge_api_throttled_total"); !maps.Equal(got, want) {
		t.Errorf("bridge_api_throttled_total = %v, want %v", got, want)
	}
}
