// Package equivalence holds the bridge's raw path, which publishes each
// object as the API server sent it, to the parsed path it replaces, which
// decodes it into maps and encodes them again, over a corpus read from a
// real API server: every object of every kind the test control plane
// serves (built-in objects created from realistic manifests, the ones the
// server makes itself, CRDs and their objects with unicode, escapes, large
// and small numbers, empty maps and lists). For each object, both paths
// must make the same event, attribute for attribute and JSON-equal in
// every field of the data.
package equivalence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/controlplane"
	testcorpus "github.com/kubebus/bridge/test/corpus"
	"github.com/kubebus/bridge/wire"
)

// customGroup is the group of the corpus's custom resources.
const customGroup = testcorpus.CustomGroup

// noObjects are the resources the test control plane serves that the
// corpus holds no object of, and why. Every other resource must have one.
var noObjects = map[string]string{}

func TestRawEventsEqualParsedEvents(t *testing.T) {
	cp := controlplane.ForTest(t)
	c := testcorpus.NewClient(t, cp.RESTConfig())
	c.CreateEverything(t, false)

	resources := watchable(c, t)
	corpus := read(c, t, resources)
	perResource := map[string]int{}
	for _, o := range corpus {
		perResource[o.resource.Name()]++
	}
	for _, r := range resources {
		why, exempt := noObjects[r.Name()]
		switch n := perResource[r.Name()]; {
		case n == 0 && !exempt:
			t.Errorf("the control plane serves %s (%s %s), and the corpus holds none of its objects: add one to testdata", r.Name(), r.APIVersion(), r.Kind)
		case n > 0 && exempt:
			t.Errorf("the corpus holds %d objects of %s, listed as having none (%s)", n, r.Name(), why)
		}
	}
	t.Logf("corpus: %d objects of %d resources", len(corpus), len(resources))
	t.Run("numbers", func(t *testing.T) { checkNumbers(t, corpus) })

	observed := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	spellings := map[string][2]string{} // number spelled differently: path -> raw, parsed
	for _, keep := range []bool{false, true} {
		enc := event.Encoder{Cluster: "prod", KeepManagedFields: keep}
		byteEqual, total := 0, 0
		for _, o := range corpus {
			for _, form := range []struct {
				name   string
				data   []byte
				parsed *unstructured.Unstructured
			}{{"get", o.get, o.getParsed}, {"list item", o.item, o.itemParsed}} {
				label := fmt.Sprintf("%s %s (%s, managedFields kept %v)", o.resource.Name(), o.key, form.name, keep)
				raw, err := rawDelta(o.resource, form.data, observed)
				if err != nil {
					t.Errorf("%s: %v", label, err)
					continue
				}
				parsed := parsedDelta(o.resource, form.parsed, keep, observed)
				for _, omitted := range []bool{false, true} {
					raw.ContentOmitted, parsed.ContentOmitted = omitted, omitted
					rm, err := enc.Encode(&raw)
					if err != nil {
						t.Fatalf("%s: raw: %v", label, err)
					}
					pm, err := enc.Encode(&parsed)
					if err != nil {
						t.Fatalf("%s: parsed: %v", label, err)
					}
					if omitted {
						// Only the identity: the same bytes.
						if !bytes.Equal(rm.Encoded, pm.Encoded) {
							t.Errorf("%s: the events without content differ\nraw    %s\nparsed %s", label, rm.Encoded, pm.Encoded)
						}
						continue
					}
					total++
					switch {
					case bytes.Equal(rm.Encoded, pm.Encoded):
						byteEqual++
					case o.resource.Group == customGroup:
						// The API server writes custom objects as the
						// parsed path does (members sorted), so their
						// events are the same bytes.
						t.Errorf("%s: the events of a custom object differ in bytes\nraw    %.2000s\nparsed %.2000s", label, rm.Encoded, pm.Encoded)
					}
					compare(t, label, rm, pm, spellings)
				}
			}
		}
		// The others are built-in objects: the API server writes their
		// members in the order of their Go types, the parsed path sorts
		// them.
		t.Logf("managedFields kept %v: %d events JSON-equal, %d of them byte-equal (every custom object's)", keep, total, byteEqual)
	}

	// The paths differ in how a number is spelled only where the parsed
	// path changes the API server's spelling, and the raw path keeps it:
	// see checkNumbers.
	var paths []string
	for p := range spellings {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var want []string
	for _, n := range numbers {
		if n.server != n.parsed {
			want = append(want, "data.object.spec.numbers."+n.field)
		}
	}
	for _, p := range paths {
		t.Logf("number spelled differently at %s: raw %s, parsed %s", p, spellings[p][0], spellings[p][1])
	}
	if !slices.Equal(paths, want) {
		t.Errorf("numbers spelled differently at %v, want exactly at %v (the numbers the parsed path respells)", paths, want)
	}
}

// rawDelta is the delta of the raw path for data, an object as the API
// server sent it.
func rawDelta(r source.Resource, data []byte, observed time.Time) (source.Delta, error) {
	m, err := rawobject.Scan(data)
	if err != nil {
		return source.Delta{}, err
	}
	return source.Delta{
		Type: source.Added, Resource: r, Observed: observed,
		Namespace: m.Namespace, Name: m.Name, UID: types.UID(m.UID), ResourceVersion: m.ResourceVersion,
		Raw: rawaccess.New(data, m).(*source.RawObject),
	}, nil
}

// parsedDelta is the delta of the parsed path for obj, as the dynamic
// client decoded it: managedFields dropped unless kept, as the source
// drops it.
func parsedDelta(r source.Resource, obj *unstructured.Unstructured, keep bool, observed time.Time) source.Delta {
	obj = obj.DeepCopy()
	if !keep {
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	}
	return source.Delta{
		Type: source.Added, Resource: r, Observed: observed,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		Object: obj,
	}
}

// compare fails t unless the events of raw and parsed are JSON-equal
// field by field: the same members with the same values, numbers equal as
// decimals. Numbers equal in value but spelled differently are recorded
// in spellings.
func compare(t *testing.T, label string, raw, parsed *wire.Message, spellings map[string][2]string) {
	t.Helper()
	var diffs []string
	diff("", decode(t, raw.Encoded), decode(t, parsed.Encoded), &diffs, spellings)
	if len(diffs) > 0 {
		t.Errorf("%s: the raw path's event differs from the parsed path's:\n  %s\nraw    %.2000s\nparsed %.2000s",
			label, strings.Join(diffs, "\n  "), raw.Encoded, parsed.Encoded)
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("event is not JSON: %v: %.300s", err, b)
	}
	return v
}

func diff(path string, a, b any, diffs *[]string, spellings map[string][2]string) {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: object, parsed %T", path, b))
			return
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s: only in raw", join(path, k)))
				continue
			}
			diff(join(path, k), av, bv, diffs, spellings)
		}
		for k := range bm {
			if _, ok := a[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s: only in parsed", join(path, k)))
			}
		}
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			*diffs = append(*diffs, fmt.Sprintf("%s: list of %d, parsed %v", path, len(a), b))
			return
		}
		for i := range a {
			diff(fmt.Sprintf("%s[%d]", path, i), a[i], bl[i], diffs, spellings)
		}
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: number %s, parsed %v", path, a, b))
			return
		}
		if a == bn {
			return
		}
		x, okx := new(big.Rat).SetString(string(a))
		y, oky := new(big.Rat).SetString(string(bn))
		if !okx || !oky || x.Cmp(y) != 0 {
			*diffs = append(*diffs, fmt.Sprintf("%s: number %s, parsed %s", path, a, bn))
			return
		}
		spellings[path] = [2]string{string(a), string(bn)}
	default:
		if a != b {
			*diffs = append(*diffs, fmt.Sprintf("%s: %#v, parsed %#v", path, a, b))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
