package rawobject

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestAppendCutUnescapingHTML(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"\u003cb\u003e \u0026 \u003C"}`, `{"a":"<b> & <"}`},
		{`{"a":"\\u003c \\\u003c \u2028 \n \u0041"}`, `{"a":"\\u003c \\< \u2028 \n \u0041"}`},
		{`{"metadata":{"managedFields":[{"m":"\u003c"}],"name":"\u0026"},"x":"\u003e"}`, `{"metadata":{"name":"&"},"x":">"}`},
		{`{"a":"no escapes"}`, `{"a":"no escapes"}`},
	} {
		m, err := Scan([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		got := m.AppendCutUnescapingHTML([]byte("prefix:"), []byte(tc.in))
		if string(got) != "prefix:"+tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// FuzzAppendCutUnescapingHTML: whatever the object, the result decodes to
// what AppendCut's decodes to.
func FuzzAppendCutUnescapingHTML(f *testing.F) {
	for _, s := range []string{`{"a":"\u003c\\u003e\\\u0026"}`, `{"metadata":{"managedFields":"\u003c","a":"\u003e"}}`, `{"\u003c":["\u0026",{"\\":"\u003E"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Scan(in)
		if err != nil {
			return
		}
		got := m.AppendCutUnescapingHTML(nil, in)
		want := m.AppendCut(nil, in)
		if len(got) > len(want) || !json.Valid(got) {
			t.Fatalf("%q: %q is not valid JSON no longer than %q", in, got, want)
		}
		if !reflect.DeepEqual(decode(t, got), decode(t, want)) || bytes.Count(got, []byte(`\u003c`)) > bytes.Count(want, []byte(`\u003c`)) {
			t.Fatalf("%q: %q decodes differently from %q", in, got, want)
		}
	})
}
