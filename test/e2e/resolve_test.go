package e2e

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/kubebus/bridge/source"
)

// Resource names are resolved the way kubectl resolves them, through
// discovery.
func TestResolveResourceNames(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string // want: group/version/resource
		kind       string
		namespaced bool
	}{
		{"configmaps", "/v1/configmaps", "ConfigMap", true},
		{"cm", "/v1/configmaps", "ConfigMap", true},
		{"ConfigMap", "/v1/configmaps", "ConfigMap", true},
		{"deployments.apps", "apps/v1/deployments", "Deployment", true},
		{"deployments.v1.apps", "apps/v1/deployments", "Deployment", true},
		{"deploy", "apps/v1/deployments", "Deployment", true},
		{"namespaces", "/v1/namespaces", "Namespace", false},
		{"clusterroles.rbac.authorization.k8s.io", "rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := source.Resolve(dc, []string{tc.name})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d resources, want 1", len(got))
			}
			r := got[0]
			if s := r.Group + "/" + r.Version + "/" + r.Resource; s != tc.want || r.Kind != tc.kind || r.Namespaced != tc.namespaced {
				t.Errorf("%s kind=%s namespaced=%v, want %s kind=%s namespaced=%v", s, r.Kind, r.Namespaced, tc.want, tc.kind, tc.namespaced)
			}
		})
	}

	t.Run("duplicates collapse", func(t *testing.T) {
		got, err := source.Resolve(dc, []string{"cm", "configmaps", "configmaps.v1."})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Errorf("%d resources, want 1", len(got))
		}
	})
	t.Run("unknown names are all named", func(t *testing.T) {
		_, err := source.Resolve(dc, []string{"configmaps", "nosuchthings", "widgets.nosuch.example.com", "pods/log"})
		if !errors.Is(err, source.ErrUnknownResource) {
			t.Fatalf("error %v does not wrap ErrUnknownResource", err)
		}
		for _, name := range []string{"nosuchthings", "widgets.nosuch.example.com", "pods/log"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error does not name %q: %v", name, err)
			}
		}
	})
}
