package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// cluster holds clients of one API server, as its admin.
type cluster struct {
	cfg    *rest.Config
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	disc   discovery.DiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// unlimited lifts client-side rate limits: the RBAC test asks thousands
// of questions.
func unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

func newCluster(t *testing.T, cfg *rest.Config) *cluster {
	t.Helper()
	cfg = unlimited(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc := memory.NewMemCacheClient(cs.Discovery())
	return &cluster{cfg: cfg, cs: cs, dyn: dyn, disc: cs.Discovery(), mapper: restmapper.NewDeferredDiscoveryRESTMapper(disc)}
}

// warnings collects the API server's warnings (deprecations, unknown
// fields, hidden environment variables...).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// dryRunClient is a dynamic client whose warnings go to w.
func (c *cluster) dryRunClient(t *testing.T, w *warnings) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(c.cfg)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// resourceFor finds where obj lives, and checks that a namespaced object
// names its namespace (so that `helm template | kubectl apply` puts it
// where helm install would).
func (c *cluster) resourceFor(dyn dynamic.Interface, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, obj.GetName(), err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		if obj.GetNamespace() != "" {
			return nil, fmt.Errorf("%s %s is cluster-scoped but has namespace %q", gvk.Kind, obj.GetName(), obj.GetNamespace())
		}
		return dyn.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		return nil, fmt.Errorf("%s %s is namespaced but names no namespace", gvk.Kind, obj.GetName())
	}
	return dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

// createNamespaces creates namespaces that do not exist yet.
func (c *cluster) createNamespaces(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		ns := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
		}}
		_, err := c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(t.Context(), ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("namespace %s: %v", name, err)
		}
	}
}

// installServiceMonitorCRD installs a ServiceMonitor CRD whose schema has
// the fields the chart uses, as the Prometheus Operator defines them, and
// nothing else, so that strict validation catches a misspelled field. It
// returns once the API server serves ServiceMonitors.
func (c *cluster) installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	str := map[string]any{"type": "string"}
	duration := map[string]any{"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
	spec := map[string]any{
		"type":     "object",
		"required": []any{"selector", "endpoints"},
		"properties": map[string]any{
			"selector": map[string]any{"type": "object", "properties": map[string]any{
				"matchLabels": map[string]any{"type": "object", "additionalProperties": str},
			}},
			"namespaceSelector": map[string]any{"type": "object", "properties": map[string]any{
				"any":        map[string]any{"type": "boolean"},
				"matchNames": map[string]any{"type": "array", "items": str},
			}},
			"endpoints": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
				"port": str, "path": str, "interval": duration, "scrapeTimeout": duration,
			}}},
		},
	}
	c.installMonitoringCRD(t, "ServiceMonitor", "servicemonitors", spec)
}

// installPrometheusRuleCRD installs a PrometheusRule CRD whose schema has
// the fields the chart uses, as the Prometheus Operator defines them, and
// nothing else. It returns once the API server serves PrometheusRules.
func (c *cluster) installPrometheusRuleCRD(t *testing.T) {
	t.Helper()
	str := map[string]any{"type": "string"}
	strMap := map[string]any{"type": "object", "additionalProperties": str}
	duration := map[string]any{"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
	rule := map[string]any{
		"type":     "object",
		"required": []any{"expr"},
		"properties": map[string]any{
			"alert":       str,
			"record":      str,
			"expr":        map[string]any{"x-kubernetes-int-or-string": true},
			"for":         duration,
			"labels":      strMap,
			"annotations": strMap,
		},
	}
	spec := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"groups": map[string]any{"type": "array", "items": map[string]any{
				"type":     "object",
				"required": []any{"name"},
				"properties": map[string]any{
					"name":     map[string]any{"type": "string", "minLength": 1},
					"interval": duration,
					"rules":    map[string]any{"type": "array", "items": rule},
				},
			}},
		},
	}
	c.installMonitoringCRD(t, "PrometheusRule", "prometheusrules", spec)
}

// installMonitoringCRD creates the Prometheus Operator's CRD of kind,
// namespaced, served and stored at v1 with spec as its spec's schema, and
// returns once the API server serves kind.
func (c *cluster) installMonitoringCRD(t *testing.T, kind, plural string, spec map[string]any) {
	t.Helper()
	const group = "monitoring.coreos.com"
	gk := schema.GroupKind{Group: group, Kind: kind}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"spec": spec},
				}},
			}},
		},
	}}
	crds := c.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s CRD: %v", gk.Kind, err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := slices.ContainsFunc(conds, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "Established" && m["status"] == "True"
		})
		if !established {
			return false, nil
		}
		c.mapper.Reset()
		_, err = c.mapper.RESTMapping(gk, "v1")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server does not serve %s: %v", gk, err)
	}
}

// groupOf splits "plural.group" (or "plural" for the core group).
func groupOf(name string) schema.GroupResource {
	plural, group, _ := strings.Cut(name, ".")
	return schema.GroupResource{Group: group, Resource: plural}
}
