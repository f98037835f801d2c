package rawobject

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func TestExtract(t *testing.T) {
	const pod = `{"kind":"Pod","apiVersion":"v1",` +
		`"metadata":{"name":"p","labels":{"app":"web"},"managedFields":[{"manager":"m"}]},` +
		`"spec":{"containers":[{"name":"a","image":"i","ports":[{"containerPort":80}]},{"name":"b","image":"j"},"odd"],"priority":-3,"weight":1.5,"big":1e3,"huge":123456789012345678901234},` +
		`"status":{"phase":"Running","ready":true,"nothing":null,"esc":"\u003c\u00e9\ud83d\ude00\ud800"}}`
	tests := []struct {
		name, paths, want string
	}{
		{"one string", "status.phase", `{"status":{"phase":"Running"}}`},
		{"whole member", "status", `{"status":{"phase":"Running","ready":true,"nothing":null,"esc":"<é😀\ufffd"}}`},
		{"two paths", "status.ready,metadata.labels", `{"status":{"ready":true},"metadata":{"labels":{"app":"web"}}}`},
		{"missing member: the object stays", "spec.nodeName", `{"spec":{}}`},
		{"missing top-level member", "nope.x", `{}`},
		{"each item", "spec.containers[*].image", `{"spec":{"containers":[{"image":"i"},{"image":"j"}]}}`},
		{"each item whole", "spec.containers[*]", `{"spec":{"containers":[{"name":"a","image":"i","ports":[{"containerPort":80}]},{"name":"b","image":"j"},"odd"]}}`},
		{"deep each", "spec.containers[*].ports[*].containerPort", `{"spec":{"containers":[{"ports":[{"containerPort":80}]},{}]}}`},
		{"a name step does not enter a list", "spec.containers.image", `{"spec":{}}`},
		{"each does not enter an object", "spec[*]", `{}`},
		{"a name step does not enter a string", "status.phase.x", `{"status":{}}`},
		{"managedFields is never decoded", "metadata", `{"metadata":{"name":"p","labels":{"app":"web"}}}`},
		{"not even asked for", "metadata.managedFields", `{"metadata":{}}`},
		{"no paths", "", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Extract([]byte(pod), treeOf(t, tt.paths))
			if err != nil {
				t.Fatal(err)
			}
			want := decodeK8s(t, tt.want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Extract(%s)\n got %#v\nwant %#v", tt.paths, got, want)
			}
		})
	}
}

func TestExtractNumbersAsUnstructured(t *testing.T) {
	data := []byte(`{"a":[0,-0,1,-1,9223372036854775807,-9223372036854775808,9223372036854775808,-9223372036854775809,1.0,1e2,-2.5E-3,1e-400,123456789012345678901234567890]}`)
	got, err := Extract(data, NewTree([]Path{{}}))
	if err != nil {
		t.Fatal(err)
	}
	want := decodeK8s(t, string(data))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Extract\n got %#v\nwant %#v", got, want)
	}
	for _, k := range []int{0, 4, 5} {
		if _, ok := got["a"].([]any)[k].(int64); !ok {
			t.Errorf("item %d is %T, want int64", k, got["a"].([]any)[k])
		}
	}
}

func TestExtractErrors(t *testing.T) {
	whole := NewTree([]Path{{}})
	tests := []struct {
		in   string
		tree *Tree
		want string
	}{
		{`{"a":1e400}`, whole, "number 1e400 out of the range of float64"},
		{`{"a":[1e400]}`, treeOf(t, "a[*]"), "out of the range"},
		{`[]`, whole, "looking for the beginning of an object"},
		{`{"a":{"b":`, treeOf(t, "a.b"), "unexpected end of input"},
		{`{"a":"\u12"}`, whole, "in \\u hexadecimal character escape"},
		{`{"a":{"b":1`, treeOf(t, "x"), "unexpected end of input in a value"},
		{`{"a":1,}`, whole, "looking for the beginning of an object key"},
		{`{"a":tru}`, whole, "in literal true"},
		{`{"a":-}`, whole, "looking for the beginning of a value"},
		{strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), whole, "nesting deeper than 10000 levels"},
	}
	for _, tt := range tests {
		_, err := Extract([]byte(tt.in), tt.tree)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Extract(%.40s): %v, want a *SyntaxError with %q", tt.in, err, tt.want)
		}
	}
	// A number out of range off the paths is not decoded.
	if _, err := Extract([]byte(`{"a":1e400,"b":1}`), treeOf(t, "b")); err != nil {
		t.Errorf("Extract of a path beside 1e400: %v", err)
	}
}

// TestExtractFixtures compares Extract of the whole fixtures, and of a
// filter's few paths, with what the unstructured decoder makes of them.
func TestExtractFixtures(t *testing.T) {
	for _, fx := range fixtures {
		data := readFixture(t, fx.name)
		for _, paths := range []string{"", "status.phase", "metadata.labels,metadata.annotations,spec.containers[*].image"} {
			tree := NewTree([]Path{{}})
			if paths != "" {
				tree = treeOf(t, paths)
			}
			got, err := Extract(data, tree)
			if err != nil {
				t.Fatal(err)
			}
			want := decodeK8s(t, string(data))
			cutManagedFields(want)
			if paths != "" {
				w, _ := refAlong(want, &tree.root)
				want = w.(map[string]any)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, paths %q:\n got %v\nwant %v", fx.name, paths, got, want)
			}
		}
	}
}

// decodeK8s decodes s as the unstructured decoder does.
func decodeK8s(tb testing.TB, s string) map[string]any {
	tb.Helper()
	var v map[string]any
	if err := utiljson.Unmarshal([]byte(s), &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// FuzzExtract feeds Extract with arbitrary bytes and paths. It may not
// panic, and on what Scan accepts it returns what the reference returns
// (reference_test.go): encoding/json's decoding restricted to the paths,
// numbers as unstructured decodes them.
func FuzzExtract(f *testing.F) {
	for _, fx := range fixtures {
		f.Add(readFixture(f, fx.name), "status.phase,metadata.labels")
	}
	for _, s := range []struct{ in, paths string }{
		{`{"a":{"b":[{"c":1},{"c":2.5},3]},"metadata":{"managedFields":1,"x":2}}`, "a.b[*].c,metadata"},
		{`{"a":{"x":1},"a":5}`, "a.x"},
		{`{"a":5,"a":{"x":1}}`, "a.x"},
		{`{"a":[[1,[2]],{"b":"\u003c"}]}`, "a[*][*]"},
		{`{"m\u0061":{"\ud800":1e400}}`, `ma["\ufffd"]`},
		{`{"a":1e400}`, "a"},
		{` {"a" : [ 1 , 2 ] } `, "a[*]"},
		{`{"a":{"b":`, "a.b"},
		{`{"a":"\u12"}`, "a"},
	} {
		f.Add([]byte(s.in), s.paths)
	}
	f.Fuzz(func(t *testing.T, in []byte, paths string) {
		ps, err := ParsePaths(paths)
		if err != nil {
			return
		}
		tree := NewTree(ps)
		got, err := Extract(in, tree)
		m, scanErr := Scan(in)
		if len(in) > 1 {
			// With a Meta of other bytes: unspecified, but no panic.
			_, _ = m.Extract(in[1:], tree)
			_, _ = m.Extract(in[:len(in)-1], tree)
		}
		if scanErr != nil {
			return // unspecified, but it neither panicked nor looped
		}
		// The members Scan noted make no difference but in speed.
		for _, mm := range []Meta{m, walking(m)} {
			if mGot, mErr := mm.Extract(in, tree); (mErr == nil) != (err == nil) || !reflect.DeepEqual(mGot, got) {
				t.Fatalf("Meta.Extract(%q, %q) = %v, %v; Extract %v, %v", in, paths, mGot, mErr, got, err)
			}
		}
		want, convErr := convertNumbers(refExtract(decode(t, in), tree))
		if convErr != nil {
			if err == nil {
				t.Fatalf("Extract(%q, %q) = %v, want an error: %v", in, paths, got, convErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("Extract(%q, %q): %v", in, paths, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Extract(%q, %q)\n got %#v\nwant %#v", in, paths, got, want)
		}
	})
}
