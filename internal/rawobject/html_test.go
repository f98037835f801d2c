package rawobject

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func TestAppendCutUnescapingHTML(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"\u003cb\u003e \u0026 \u003C"}`, `{"a":"<b> & <"}`},
		{`{"a":"\\u003c \\\u003c \u2028 \n \u0041"}`, `{"a":"\\u003c \\< \u2028 \n \u0041"}`},
		{`{"metadata":{"managedFields":[{"m":"\u003c"}],"name":"\u0026"},"x":"\u003e"}`, `{"metadata":{"name":"&"},"x":">"}`},
		{`{"a":"no escapes"}`, `{"a":"no escapes"}`},
		{`{"a":"other escapes \u0041 \"\\u003c\" \u00260"}`, `{"a":"other escapes \u0041 \"\\u003c\" &0"}`},
		{`{"\u003e":1}`, `{">":1}`},
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

// An object without the escapes is copied as it is, whether it is read on
// its own or as an item of a list: the scan tells, per object.
func TestScanNotesHTMLEscapes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		plain bool
	}{
		{`{"a":"x \\u003c \u0041"}`, true},
		{`{"a":"\u003c"}`, false},
		{`{"\u0026":1}`, false},
		{`{"metadata":{"managedFields":[{"m":"\u003E"}]}}`, false},
	} {
		m, err := Scan([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if m.plain != tc.plain {
			t.Errorf("Scan(%s): plain %v, want %v", tc.in, m.plain, tc.plain)
		}
	}
	l, err := scanList([]byte(`{"items":[{"a":"\u003c"},{"b":"c"},{"d":"\u0026"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false}; !slices.Equal(l.plain, want) {
		t.Errorf("ScanList: plain %v, want %v", l.plain, want)
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
		// Copied as they are only when no escape is rewritten.
		if slow := appendUnescapingHTML(nil, want); !bytes.Equal(got, slow) {
			t.Fatalf("%q: %q, without the scan's count of escapes %q", in, got, slow)
		}
		if len(got) > len(want) || !json.Valid(got) {
			t.Fatalf("%q: %q is not valid JSON no longer than %q", in, got, want)
		}
		if !reflect.DeepEqual(decode(t, got), decode(t, want)) || bytes.Count(got, []byte(`\u003c`)) > bytes.Count(want, []byte(`\u003c`)) {
			t.Fatalf("%q: %q decodes differently from %q", in, got, want)
		}
	})
}
