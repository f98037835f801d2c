package equivalence

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/source"
	testcorpus "github.com/kubebus/bridge/test/corpus"
)

// watchable is every resource the API server serves that the bridge can
// watch (list and watch), at its preferred version.
func watchable(c *testcorpus.Client, t *testing.T) []source.Resource {
	t.Helper()
	lists, err := c.Disco.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	var out []source.Resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			out = append(out, source.Resource{GroupVersionResource: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	return out
}

// object is one object of the corpus, as the API server sent it and as
// today's source decodes it.
type object struct {
	resource source.Resource
	key      string
	// get is the object as a GET (or a watch event) sends it, and
	// getParsed what the dynamic client's decoder makes of it.
	get       []byte
	getParsed *unstructured.Unstructured
	// item is the object as an item of a list of its resource, which
	// lacks apiVersion and kind for built-in kinds, and itemParsed what
	// the dynamic client's decoder makes of it (it adds them).
	item       []byte
	itemParsed *unstructured.Unstructured
}

// read lists every object of the resources, and gets each.
func read(c *testcorpus.Client, t *testing.T, resources []source.Resource) []object {
	t.Helper()
	var out []object
	for _, r := range resources {
		body, _, err := c.Do(http.MethodGet, testcorpus.Path(r, "", ""), nil, http.StatusOK)
		if err != nil {
			t.Fatal(err)
		}
		var raw struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatalf("list %s: %v", r.Name(), err)
		}
		decoded, err := runtime.Decode(unstructured.UnstructuredJSONScheme, body)
		if err != nil {
			t.Fatalf("list %s: %v", r.Name(), err)
		}
		list, ok := decoded.(*unstructured.UnstructuredList)
		if !ok || len(list.Items) != len(raw.Items) {
			t.Fatalf("list %s: decoded into %T", r.Name(), decoded)
		}
		for i, item := range list.Items {
			get, _, err := c.Do(http.MethodGet, testcorpus.Path(r, item.GetNamespace(), item.GetName()), nil, http.StatusOK)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, get)
			if err != nil {
				t.Fatalf("get %s %s: %v", r.Name(), item.GetName(), err)
			}
			out = append(out, object{
				resource: r, key: source.ObjectKey(item.GetNamespace(), item.GetName()),
				get: get, getParsed: obj.(*unstructured.Unstructured),
				item: raw.Items[i], itemParsed: &list.Items[i],
			})
		}
	}
	return out
}
