package discoverydoc

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/wire"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// syncWait bounds the wait for the CRD informer's first list before the
// first document: one without columns is better than none, and the
// informer's events build the document again once it has listed.
const syncWait = 15 * time.Second

// crdColumns holds what the CustomResourceDefinitions say of their
// printer columns, from an informer. The zero value (no informer) knows
// no columns.
type crdColumns struct {
	store cache.Store
}

// startCRDs starts an informer of the CRDs that calls changed on every
// change of what the documents take of them (slimCRD): not on one of a
// CRD's status alone, and waits a while for its first list. It returns a crdColumns
// without a store, having logged it once, when the bridge may not list
// CRDs. wg waits for the informer.
func startCRDs(ctx context.Context, client dynamic.Interface, changed func(), wg *sync.WaitGroup, log *slog.Logger) crdColumns {
	if client == nil {
		return crdColumns{}
	}
	if _, err := client.Resource(crdResource).List(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsForbidden(err) {
		log.Warn("the discovery documents carry no printer columns of CRDs: forbidden to list customresourcedefinitions.apiextensions.k8s.io; grant the bridge get, list and watch on them", "err", err)
		return crdColumns{}
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(client, crdResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	_ = inf.SetTransform(slimCRD)
	var forbidden sync.Once
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			forbidden.Do(func() {
				log.Warn("the discovery documents may carry stale printer columns of CRDs while the bridge is forbidden to list or watch customresourcedefinitions.apiextensions.k8s.io", "err", err)
			})
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(old, new any) {
			if crdUpdateMatters(old, new) {
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		log.Warn("the discovery documents carry no printer columns of CRDs", "err", err)
		return crdColumns{}
	}
	wg.Go(func() { inf.RunWithContext(ctx) })
	wctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) && ctx.Err() == nil {
		log.Warn("customresourcedefinitions not listed yet: the first discovery document may lack CRDs' printer columns; it is published again once they are listed")
	}
	return crdColumns{store: inf.GetStore()}
}

// crd is the CRD, as the informer holds it, that defines gvr's group and
// resource; false when none does.
func (c crdColumns) crd(gvr schema.GroupVersionResource) (*unstructured.Unstructured, bool) {
	if c.store == nil {
		return nil, false
	}
	// A CRD's name is <plural>.<group>, as the API server requires.
	obj, ok, err := c.store.GetByKey(gvr.Resource + "." + gvr.Group)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	if g, _, _ := unstructured.NestedString(u.Object, "spec", "group"); g != gvr.Group {
		return nil, false
	}
	return u, true
}

// names are the singular name, short names and categories the CRD that
// defines gvr gives it; false when no CRD does. A CRD's informer tells of
// their changes, where discovery shows them a moment later.
func (c crdColumns) names(gvr schema.GroupVersionResource) (singular string, shortNames, categories []string, ok bool) {
	u, ok := c.crd(gvr)
	if !ok {
		return "", nil, nil, false
	}
	singular, _, _ = unstructured.NestedString(u.Object, "spec", "names", "singular")
	shortNames, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "names", "shortNames")
	categories, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "names", "categories")
	return singular, shortNames, categories, true
}

// columns are the additionalPrinterColumns of version of the CRD that
// defines gvr's group and resource; none when no CRD defines it.
func (c crdColumns) columns(gvr schema.GroupVersionResource) []wire.PrinterColumn {
	u, ok := c.crd(gvr)
	if !ok {
		return nil
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok || m["name"] != gvr.Version {
			continue
		}
		cols, _ := m["additionalPrinterColumns"].([]any)
		var out []wire.PrinterColumn
		for _, col := range cols {
			cm, ok := col.(map[string]any)
			if !ok {
				continue
			}
			pc := wire.PrinterColumn{Name: str(cm["name"]), Type: str(cm["type"]), Format: str(cm["format"]),
				Description: str(cm["description"]), JSONPath: str(cm["jsonPath"])}
			switch p := cm["priority"].(type) {
			case int64:
				pc.Priority = int32(p)
			case float64:
				pc.Priority = int32(p)
			}
			if pc.Name != "" && pc.JSONPath != "" {
				out = append(out, pc)
			}
		}
		return out
	}
	return nil
}

// crdUpdateMatters tells whether an update of a CRD, as slimCRD left its
// old and new objects, changes what the documents take of it: its name
// and spec (group, names, versions' names and printer columns), not its
// resourceVersion, which every update of its status changes.
func crdUpdateMatters(old, new any) bool {
	o, ok1 := old.(*unstructured.Unstructured)
	n, ok2 := new.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetName() != n.GetName() || !reflect.DeepEqual(o.Object["spec"], n.Object["spec"])
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// slimCRD keeps of a CRD only its name, group, names (singular, short
// names, categories) and versions' names and printer columns, so that the informer does not hold every CRD's
// schemas.
func slimCRD(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	if g, ok, _ := unstructured.NestedString(u.Object, "spec", "group"); ok {
		_ = unstructured.SetNestedField(out.Object, g, "spec", "group")
	}
	if names, ok, _ := unstructured.NestedMap(u.Object, "spec", "names"); ok {
		kept := map[string]any{}
		for _, k := range []string{"singular", "shortNames", "categories"} {
			if v, ok := names[k]; ok {
				kept[k] = v
			}
		}
		_ = unstructured.SetNestedMap(out.Object, kept, "spec", "names")
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	slim := make([]any, 0, len(versions))
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		kept := map[string]any{"name": m["name"]}
		if cols, ok := m["additionalPrinterColumns"]; ok {
			kept["additionalPrinterColumns"] = cols
		}
		slim = append(slim, kept)
	}
	_ = unstructured.SetNestedSlice(out.Object, slim, "spec", "versions")
	return out, nil
}
