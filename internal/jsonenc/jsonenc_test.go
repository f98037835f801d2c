package jsonenc_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/internal/jsonenc"
	"github.com/kubebus/bridge/test/synthetic"
)

// marshal is json.Marshal without HTML escaping: what AppendValue must
// write.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// same fails unless AppendValue writes v exactly as json.Marshal does
// without HTML escaping, or fails as it does.
func same(t *testing.T, v any) {
	t.Helper()
	want, wantErr := marshal(v)
	prefix := []byte("prefix:")
	got, err := jsonenc.AppendValue(prefix, v)
	switch {
	case wantErr != nil:
		if err == nil {
			t.Fatalf("AppendValue(%#v) = %s, want the error %v", v, got, wantErr)
		}
		if err.Error() != wantErr.Error() {
			t.Errorf("AppendValue(%#v) failed with %q, json.Marshal with %q", v, err, wantErr)
		}
		if !bytes.Equal(got, prefix) {
			t.Errorf("AppendValue(%#v) failed and changed the buffer to %q", v, got)
		}
	case err != nil:
		t.Fatalf("AppendValue(%#v): %v; json.Marshal wrote %s", v, err, want)
	case !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want):
		t.Errorf("AppendValue(%#v)\n got %s\nwant %s", v, got[len(prefix):], want)
	}
}

func TestAppendValueLikeMarshal(t *testing.T) {
	var allASCII strings.Builder
	for c := range 128 {
		allASCII.WriteByte(byte(c))
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	many := map[string]any{}
	for i := range 3 * jsonenc.MaxPooledFields {
		many[strconv.Itoa(i)] = map[string]any{"i": int64(i), "s": strings.Repeat("x", i%7)}
	}
	deep := any("leaf")
	for i := range 2 * jsonenc.MaxDepth {
		if i%2 == 0 {
			deep = map[string]any{"k": deep}
		} else {
			deep = []any{deep, int64(i)}
		}
	}

	tests := []struct {
		name string
		v    any
	}{
		{"null", nil},
		{"true", true},
		{"false", false},
		{"empty string", ""},
		{"every ASCII byte", allASCII.String()},
		{"HTML", `<a href="x?a=1&b=2">`},
		{"non-ASCII", "héllo wörld, 日本語, 🚀"},
		{"invalid UTF-8", "a\xffb\xc3(c\xed\xa0\x80d"},
		{"cut-short sequence at the end", "abc\xe6\x97"},
		{"line and paragraph separators", "a\u2028b\u2029c"},
		{"int64", int64(-42)},
		{"int64 extremes", []any{int64(math.MinInt64), int64(math.MaxInt64)}},
		{"int", 7},
		{"floats", []any{0.0, math.Copysign(0, -1), 1.5, -123.456, 1e20, 1e21, 1e-6, 1e-7, 9.999999e-7, 5e-324, math.MaxFloat64, -1.5e-10, 1e100, 123456789.125}},
		{"NaN", math.NaN()},
		{"infinity inside", map[string]any{"a": []any{1.0, math.Inf(-1)}}},
		{"empty map", map[string]any{}},
		{"nil map", map[string]any(nil)},
		{"empty slice", []any{}},
		{"nil slice", []any(nil)},
		{"keys sorted bytewise", map[string]any{"b": 1, "a": 2, "B": 3, "é": 4, "": 5, "a\x00": 6, "<k>": 7}},
		{"nested", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "args": []any{"--x", "--y"}}}, "replicas": int64(3)}}},
		{"other types", map[string]any{
			"strings":  map[string]string{"z": "1", "a": "<2>"},
			"list":     []string{"a", "b"},
			"int32":    int32(5),
			"float32":  float32(0.1),
			"number":   json.Number("12.50"),
			"time":     time.Date(2026, 11, 21, 8, 0, 0, 5, time.UTC),
			"raw":      json.RawMessage(`{ "spaced" : [1, 2] }`),
			"struct":   struct{ A string }{"<b>"},
			"pointer":  new("x"),
			"byteblob": []byte("hi"),
		}},
		{"deep", deep},
		{"many entries", many},
		{"cycle", cyclic},
		{"ConfigMap", synthetic.Unstructured(synthetic.ConfigMap(1)).Object},
		{"Pod", synthetic.Unstructured(synthetic.Pod(1)).Object},
	}
	for _, tt := range tests {
		// Twice: the second run reuses the first one's scratch space.
		t.Run(tt.name, func(t *testing.T) { same(t, tt.v); same(t, tt.v) })
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" backslash\\ tab\t", "<>&", "\x00\x1f\x7f", "\u2028", "\xff"} {
		want, _ := marshal(s)
		if got := jsonenc.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// "<", ">" and "&" are written as they are: the bus is no HTML page, and
// their escapes take six bytes each.
func TestNoHTMLEscaping(t *testing.T) {
	v := map[string]any{"<k>": "<a href=\"x?a=1&b=2\">", "list": []any{"&", map[string]string{"x": "<>"}}}
	got, err := jsonenc.AppendValue(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"<k>":"<a href=\"x?a=1&b=2\">","list":["&",{"x":"<>"}]}`
	if string(got) != want {
		t.Errorf("AppendValue\n got %s\nwant %s", got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "<script>&", "\u2028\u2029", "\xed\xa0\x80", "\xf4\x90\x80\x80", "日本\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		same(t, s)
		same(t, map[string]any{s: s})
	})
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 1, -1, 0.1, 1e-6, 1e-7, 1e21, 1e20, 123.456e-300, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) { same(t, v) })
}

func BenchmarkAppendValue(b *testing.B) {
	for _, tt := range []struct {
		name string
		obj  map[string]any
	}{
		{"ConfigMap", synthetic.Unstructured(synthetic.ConfigMap(1)).Object},
		{"Pod", synthetic.Unstructured(synthetic.Pod(1)).Object},
	} {
		b.Run(tt.name, func(b *testing.B) {
			buf, err := jsonenc.AppendValue(nil, tt.obj)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = jsonenc.AppendValue(buf[:0], tt.obj); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tt.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(tt.obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
