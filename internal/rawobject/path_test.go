package rawobject

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func name(s string) Step { return Step{Name: s} }

var each = Step{Each: true}

func TestParsePaths(t *testing.T) {
	tests := []struct {
		in   string
		want []Path
	}{
		{"", nil},
		{"  \t", nil},
		{"status", []Path{{name("status")}}},
		{"spec.template.spec", []Path{{name("spec"), name("template"), name("spec")}}},
		{"status, metadata.labels.app ,spec", []Path{{name("status")}, {name("metadata"), name("labels"), name("app")}, {name("spec")}}},
		{`metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
			[]Path{{name("metadata"), name("annotations"), name("kubectl.kubernetes.io/last-applied-configuration")}}},
		{`metadata.labels['app.kubernetes.io/name'],status`, []Path{{name("metadata"), name("labels"), name("app.kubernetes.io/name")}, {name("status")}}},
		{`a["x,y"],b`, []Path{{name("a"), name("x,y")}, {name("b")}}},
		{`a['it\'s'],b["say \"hi\""],c["back\\slash"]`, []Path{{name("a"), name("it's")}, {name("b"), name(`say "hi"`)}, {name("c"), name(`back\slash`)}}},
		{`a["'"],b['"']`, []Path{{name("a"), name("'")}, {name("b"), name(`"`)}}},
		{"spec.containers[*].resources", []Path{{name("spec"), name("containers"), each, name("resources")}}},
		{"a[*][*]", []Path{{name("a"), each, each}}},
		{`["weird key"].x`, []Path{{name("weird key"), name("x")}}},
		{`[*]`, []Path{{each}}},
		{`a[ "b" ][ * ]`, []Path{{name("a"), name("b"), each}}},
		{`a[""]`, []Path{{name("a"), name("")}}},
		{`_a1.B_2`, []Path{{name("_a1"), name("B_2")}}},
		{`a["ünïcode ✓"]`, []Path{{name("a"), name("ünïcode ✓")}}},
	}
	for _, tt := range tests {
		got, err := ParsePaths(tt.in)
		if err != nil {
			t.Errorf("ParsePaths(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePaths(%q)\n got %#v\nwant %#v", tt.in, got, tt.want)
		}
	}
}

func TestParsePathsErrors(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		msg    string // a part of the message
	}{
		{",", 0, `unexpected "," in path "": expected a field path`},
		{"status,", 7, `unexpected end of input in path "": expected a field path`},
		{"a,,b", 2, `expected a field path`},
		{"status,metadata.", 16, `unexpected end of input in path "metadata.": expected a field name after "."`},
		{"metadata.labels.app-name,status", 19, `unexpected '-' in path "metadata.labels.app-name": expected ".", "[" or "," after a step (write a name with other characters`},
		{"a b", 2, `expected ".", "[" or "," after a step`},
		{"a .b", 2, `unexpected '.'`},
		{"1a", 0, `expected a field path: a field name or "["`},
		{"a.1", 2, `expected a field name after "."`},
		{"a..b", 2, `expected a field name after "."`},
		{"a[", 2, `expected a quoted name or "*" after "["`},
		{"a[b]", 2, `expected a quoted name or "*" after "["`},
		{"a[0]", 2, `expected a quoted name or "*" after "["`},
		{`a["b"`, 5, `expected "]"`},
		{`a["b" x]`, 6, `expected "]"`},
		{`a[*`, 3, `expected "]"`},
		{`a["b]`, 5, `the quoted name that starts at position 2 is not closed`},
		{`a["b\`, 5, `the quoted name that starts at position 2 is not closed`},
		{`a["b\n"]`, 4, `unknown escape in a quoted name: only \", \' and \\ are escapes`},
		{"a[\"\xff\"]", 3, `invalid UTF-8 in path "a[\"\xff\"]"`},
		{"a\xff", 1, `unexpected byte 0xff`},
		{"a,b\x00", 3, `unexpected '\x00' in path "b\x00"`},
		{`a["x,y"] ,c.`, 12, `in path "c."`},
	}
	for _, tt := range tests {
		got, err := ParsePaths(tt.in)
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("ParsePaths(%q) = %v, %v; want a *PathError", tt.in, got, err)
			continue
		}
		if pe.Offset != tt.offset || !strings.Contains(pe.Msg, tt.msg) {
			t.Errorf("ParsePaths(%q): %v\nwant offset %d, message with %q", tt.in, err, tt.offset, tt.msg)
		}
		if !strings.HasPrefix(err.Error(), "position ") {
			t.Errorf("ParsePaths(%q): %q does not start with the position", tt.in, err)
		}
	}
}

func TestPathString(t *testing.T) {
	tests := []struct {
		p    Path
		want string
	}{
		{Path{name("status")}, "status"},
		{Path{name("spec"), name("containers"), each, name("image")}, "spec.containers[*].image"},
		{Path{name("metadata"), name("annotations"), name("kubectl.kubernetes.io/last-applied-configuration")},
			`metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`},
		{Path{name("a b"), name(`q"b\`), name(""), name("1x")}, `["a b"]["q\"b\\"][""]["1x"]`},
		{Path{each, name("_x9")}, "[*]._x9"},
		{Path{}, ""},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %s, want %s", tt.p, got, tt.want)
		}
	}
}

func TestPathIsIdentity(t *testing.T) {
	for in, want := range map[string]bool{
		"apiVersion":                  true,
		"kind":                        true,
		"metadata.name":               true,
		`metadata["namespace"]`:       true,
		"metadata.uid":                true,
		"metadata.resourceVersion":    true,
		"metadata.deletionTimestamp":  true,
		"metadata.name.x":             true,
		"metadata":                    false,
		"metadata.labels":             false,
		"metadata.managedFields":      false,
		"metadata.generateName":       false,
		"spec.metadata.name":          false,
		"metadata[*].name":            false,
		"status":                      false,
		"kinds":                       false,
		"metadata.creationTimestamp":  false,
		`metadata.annotations["uid"]`: false,
	} {
		ps, err := ParsePaths(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := ps[0].IsIdentity(); got != want {
			t.Errorf("%s.IsIdentity() = %v, want %v", in, got, want)
		}
	}
}

// FuzzParsePaths feeds ParsePaths with arbitrary text. It may not panic;
// its errors are *PathError within the input; what it parses, written
// back with String and joined with commas, parses to the same paths.
func FuzzParsePaths(f *testing.F) {
	for _, s := range []string{
		"status", "spec.template.spec, status", `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
		`a['it\'s'],b["x,y"]`, "spec.containers[*].resources", `a[ "b" ][ * ]`, `["\\"]`, "a,", "a..b", `a["\n"]`,
		"a[\"\xff\"]", `a[""]`, " ,", "a[*", `a["b\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		paths, err := ParsePaths(in)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(in) {
				t.Fatalf("ParsePaths(%q): %v is not a *PathError within the input", in, err)
			}
			return
		}
		var texts []string
		for _, p := range paths {
			if len(p) == 0 {
				t.Fatalf("ParsePaths(%q) gave an empty path", in)
			}
			texts = append(texts, p.String())
		}
		again, err := ParsePaths(strings.Join(texts, ","))
		if err != nil || !reflect.DeepEqual(again, paths) {
			t.Fatalf("ParsePaths(%q) = %#v, written back as %q, parses to %#v, %v", in, paths, texts, again, err)
		}
	})
}
