package filter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// decode decodes a JSON object as Kubernetes' unstructured decoding does:
// integers int64, other numbers float64.
func decode(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		tb.Fatalf("decoding %s: %v", data, err)
	}
	return m
}

// podFixture is the Pod of internal/rawobject's testdata (about 13 KiB, as
// the API server sends it), decoded, managedFields cut as the bridge cuts
// them.
func podFixture(tb testing.TB) map[string]any {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "rawobject", "testdata", "pod.json"))
	if err != nil {
		tb.Fatal(err)
	}
	obj := decode(tb, data)
	delete(obj["metadata"].(map[string]any), "managedFields")
	return obj
}

// varsOf builds an object's variables as the bridge does.
func varsOf(resource string, obj map[string]any) *Vars {
	v := &Vars{Resource: resource, Object: obj}
	meta, _ := obj["metadata"].(map[string]any)
	v.Namespace, _ = meta["namespace"].(string)
	v.Name, _ = meta["name"].(string)
	v.Labels = stringMap(meta["labels"])
	v.Annotations = stringMap(meta["annotations"])
	return v
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func mustCompile(tb testing.TB, expr string) *Filter {
	tb.Helper()
	f, err := Compile(expr)
	if err != nil {
		tb.Fatalf("Compile(%q): %v", expr, err)
	}
	return f
}

// decodeAgain is obj's JSON, to compare an object before and after.
func decodeAgain(tb testing.TB, obj map[string]any) string {
	tb.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
