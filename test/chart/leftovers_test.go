package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objectRef names one object: its kind, namespace ("" when cluster-scoped)
// and name.
type objectRef struct {
	gk              schema.GroupKind
	namespace, name string
}

func refOf(obj *unstructured.Unstructured) objectRef {
	return objectRef{gk: obj.GroupVersionKind().GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

func (r objectRef) String() string {
	if r.namespace == "" {
		return r.gk.Kind + " " + r.name
	}
	return r.gk.Kind + " " + r.namespace + "/" + r.name
}

// refsOf names objs, sorted.
func refsOf(objs []*unstructured.Unstructured) []objectRef {
	refs := make([]objectRef, 0, len(objs))
	for _, o := range objs {
		refs = append(refs, refOf(o))
	}
	slices.SortFunc(refs, func(a, b objectRef) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(refs)
}

// sourced is a rendered manifest's objects by the template file that
// rendered them (its base name, e.g. "role.yaml").
type sourced map[string][]*unstructured.Unstructured

// all is every object, whatever its template.
func (s sourced) all() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, f := range slices.Sorted(maps.Keys(s)) {
		out = append(out, s[f]...)
	}
	return out
}

// renderSourced renders the chart as release in namespace with the values
// file, and sorts the objects by the "# Source:" line helm writes above
// each of them.
func renderSourced(t testing.TB, release, namespace, valuesFile string) sourced {
	t.Helper()
	manifest, err := template(t, release, namespace, "-f", valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "# Source: bridge/templates/"
	out := sourced{}
	for doc := range strings.SplitSeq(manifest, "\n---\n") {
		_, rest, ok := strings.Cut(doc, prefix)
		if !ok {
			continue
		}
		file, body, _ := strings.Cut(rest, "\n")
		objs, err := decodeManifest(body)
		if err != nil {
			t.Fatalf("%s: %v\n%s", file, err, body)
		}
		out[file] = append(out[file], objs...)
	}
	return out
}

// templateFiles are the chart's templates that may render objects: every
// file in templates/ but the helpers (_*.tpl) and NOTES.txt.
func templateFiles(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(chartDir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), "_") || e.Name() == "NOTES.txt" {
			continue
		}
		files = append(files, e.Name())
	}
	return files
}

// chartKind is a kind of object the chart renders, as the API server
// serves it.
type chartKind struct {
	gk         schema.GroupKind
	gvr        schema.GroupVersionResource
	namespaced bool
}

// chartKinds are the kinds of the objects in renders. Together the
// renders must use every template file of the chart: t fails naming a file
// that contributes no object, since what it would render is then checked
// by no one.
func (c *cluster) chartKinds(t *testing.T, renders ...sourced) map[schema.GroupKind]chartKind {
	t.Helper()
	kinds := map[schema.GroupKind]chartKind{}
	used := map[string]bool{}
	for _, r := range renders {
		for file, objs := range r {
			used[file] = used[file] || len(objs) > 0
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				if _, ok := kinds[gvk.GroupKind()]; ok {
					continue
				}
				m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Fatalf("%s renders %s, which the API server does not serve: %v", file, gvk, err)
				}
				kinds[gvk.GroupKind()] = chartKind{gk: gvk.GroupKind(), gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
			}
		}
	}
	for _, f := range templateFiles(t) {
		if !used[f] {
			t.Errorf("templates/%s renders nothing with the lifecycle's value sets: give them one that uses it", f)
		}
	}
	return kinds
}

// found is an object the API server holds.
type found struct {
	objectRef
	deleting   bool // it has a deletionTimestamp and waits for finalizers
	finalizers []string
}

func foundOf(gk schema.GroupKind, obj *unstructured.Unstructured) found {
	return found{
		objectRef:  objectRef{gk: gk, namespace: obj.GetNamespace(), name: obj.GetName()},
		deleting:   obj.GetDeletionTimestamp() != nil,
		finalizers: obj.GetFinalizers(),
	}
}

func (f found) String() string {
	if f.deleting {
		return fmt.Sprintf("%s (being deleted, finalizers %v)", f.objectRef, f.finalizers)
	}
	return f.objectRef.String()
}

// pvcProtection is the finalizer the API server puts on every
// PersistentVolumeClaim. kube-controller-manager removes it once no pod
// uses the claim; no controller-manager runs in these tests.
const pvcProtection = "kubernetes.io/pvc-protection"

// released is whether f is a claim that was deleted and waits only for
// kube-controller-manager to see that no pod uses it.
func (f found) released() bool {
	return f.deleting && f.gk == (schema.GroupKind{Kind: "PersistentVolumeClaim"}) && slices.Equal(f.finalizers, []string{pvcProtection})
}

// releaseSelector selects the objects of release by the labels the chart
// puts on every object.
func releaseSelector(release string) string {
	return "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/managed-by=Helm"
}

// byLabels lists every kind, in all namespaces and cluster-wide, for the
// objects that carry release's labels.
func (c *cluster) byLabels(t *testing.T, kinds map[schema.GroupKind]chartKind, release string) []found {
	t.Helper()
	var out []found
	for _, k := range slices.SortedFunc(maps.Values(kinds), func(a, b chartKind) int { return strings.Compare(a.gk.String(), b.gk.String()) }) {
		list, err := c.dyn.Resource(k.gvr).List(t.Context(), metav1.ListOptions{LabelSelector: releaseSelector(release)})
		if err != nil {
			t.Fatalf("list %s: %v", k.gvr.GroupResource(), err)
		}
		for i := range list.Items {
			out = append(out, foundOf(k.gk, &list.Items[i]))
		}
	}
	return out
}

// byName gets each of refs and returns those the API server holds.
func (c *cluster) byName(t *testing.T, kinds map[schema.GroupKind]chartKind, refs []objectRef) []found {
	t.Helper()
	var out []found
	for _, r := range refs {
		k, ok := kinds[r.gk]
		if !ok {
			t.Fatalf("%s: not a kind the chart renders", r)
		}
		ri := c.dyn.Resource(k.gvr).Namespace(r.namespace)
		obj, err := ri.Get(t.Context(), r.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("get %s: %v", r, err)
		}
		out = append(out, foundOf(r.gk, obj))
	}
	return out
}

// releaseRecords are the Secrets in which helm keeps release's revisions
// (sh.helm.release.v1.<release>.v<revision>), found by name.
func (c *cluster) releaseRecords(t *testing.T, namespace, release string) []string {
	t.Helper()
	list, err := c.cs.CoreV1().Secrets(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, "sh.helm.release.v1."+release+".") {
			names = append(names, s.Name)
		}
	}
	return names
}
