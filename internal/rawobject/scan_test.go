package rawobject

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScanReadsIdentity(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Meta
	}{{
		name: "as the API server sends it",
		in:   `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"app","namespace":"team-a","uid":"6f1c","resourceVersion":"42","creationTimestamp":"2026-11-20T09:30:00Z","managedFields":[{"manager":"kubectl"}]},"data":{"a":"b"}}` + "\n",
		want: Meta{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "app", UID: "6f1c", ResourceVersion: "42"},
	}, {
		name: "cluster-scoped, being deleted",
		in:   `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"deletionTimestamp":"2026-11-20T09:30:00Z","name":"view","uid":"u","resourceVersion":"7"}}`,
		want: Meta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "view", UID: "u", ResourceVersion: "7",
			DeletionTimestamp: "2026-11-20T09:30:00Z", HasDeletionTimestamp: true},
	}, {
		name: "empty deletionTimestamp is there",
		in:   `{"metadata":{"deletionTimestamp":""}}`,
		want: Meta{HasDeletionTimestamp: true},
	}, {
		name: "escapes in keys and values",
		in:   `{"\u0061piVersion":"example.com\/v1","kind":"W\u00e9b","met\u0061data":{"n\u0061me":"\ud83d\ude00 \"x\"\\\b\f\n\r\t","namespace":"\ud800-\udc00-\ud800\u0041"}}`,
		want: Meta{APIVersion: "example.com/v1", Kind: "Wéb", Name: "😀 \"x\"\\\b\f\n\r\t", Namespace: "\uFFFD-\uFFFD-\uFFFDA"},
	}, {
		name: "whitespace everywhere",
		in:   " \t\r\n{ \"kind\" : \"Pod\" , \"metadata\" : { \"name\" : \"p\" } } \n",
		want: Meta{Kind: "Pod", Name: "p"},
	}, {
		name: "values that are not strings are absent",
		in:   `{"apiVersion":1,"kind":null,"metadata":{"name":{"a":"b"},"namespace":["x"],"uid":true,"resourceVersion":1.5e3,"deletionTimestamp":null}}`,
		want: Meta{},
	}, {
		name: "metadata that is not an object",
		in:   `{"kind":"Pod","metadata":"name"}`,
		want: Meta{Kind: "Pod"},
	}, {
		name: "nested keys of the same names are not read",
		in:   `{"spec":{"kind":"x","metadata":{"name":"inner"}},"metadata":{"labels":{"name":"label"},"name":"outer"}}`,
		want: Meta{Name: "outer"},
	}, {
		name: "the last duplicate key wins",
		in:   `{"kind":"A","kind":"B","metadata":{"name":"a","name":"b","uid":"u","uid":5}}`,
		want: Meta{Kind: "B", Name: "b"},
	}, {
		name: "a second metadata replaces the first whole",
		in:   `{"metadata":{"name":"a","namespace":"ns"},"metadata":{"name":"b"}}`,
		want: Meta{Name: "b"},
	}, {
		name: "an empty object",
		in:   `{}`,
		want: Meta{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Scan([]byte(tt.in))
			if err != nil {
				t.Fatalf("Scan(%s): %v", tt.in, err)
			}
			// The spans, the note of escapes and the members have tests
			// of their own.
			got.managed, tt.want.managed = spans{}, spans{}
			got.unhashed, tt.want.unhashed = spans{}, spans{}
			got.plain, tt.want.plain = false, false
			got.members, tt.want.members = members{}, members{}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Scan(%s)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestScanRefusesInvalidJSON(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	tooDeep := `{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + "}"
	if _, err := Scan([]byte(deep)); err != nil {
		t.Fatalf("Scan of %d levels: %v", MaxDepth, err)
	}
	tests := []struct {
		in, want string
	}{
		{``, "unexpected end of input looking for the beginning of an object at byte offset 0"},
		{`[]`, "invalid character '[' looking for the beginning of an object at byte offset 0"},
		{`null`, "invalid character 'n' looking for the beginning of an object at byte offset 0"},
		{`{"kind":"Pod"`, "unexpected end of input after an object member at byte offset 13"},
		{`{"kind":"Pod"}x`, "invalid character 'x' after the top-level object at byte offset 14"},
		{`{"kind":"Pod"}{}`, "invalid character '{' after the top-level object at byte offset 14"},
		{`{"kind":"Po`, "unexpected end of input in string at byte offset 11"},
		{"{\"kind\":\"P\xffd\"}", "invalid UTF-8 in string at byte offset 10"},
		{"{\"k\xc3\":1}", "invalid UTF-8 in string at byte offset 3"},
		{"{\"spec\":{\"a\":[\"\xed\xa0\x80\"]}}", "invalid UTF-8 in string at byte offset 15"},
		{"{\"kind\":\"P\nd\"}", "control character byte 0x0a in string at byte offset 10"},
		{`{"kind":"P\xd"}`, "invalid character 'x' in string escape code at byte offset 11"},
		{`{"kind":"P\u00g1"}`, "invalid character 'g' in \\u hexadecimal character escape at byte offset 14"},
		{`{"kind":"P\u00`, "unexpected end of input in string escape at byte offset 14"},
		{`{"spec":01}`, "invalid character '1' after an object member at byte offset 9"},
		{`{"spec":-}`, "invalid character '}' looking for the beginning of a value at byte offset 9"},
		{`{"spec":1.}`, "invalid character '}' after the decimal point in a number at byte offset 10"},
		{`{"spec":1e+}`, "invalid character '}' in the exponent of a number at byte offset 11"},
		{`{"spec":+1}`, "invalid character '+' looking for the beginning of a value at byte offset 8"},
		{`{"spec":tru}`, "invalid character '}' in literal true at byte offset 11"},
		{`{"spec":[1,]}`, "invalid character ']' looking for the beginning of a value at byte offset 11"},
		{`{"spec":[1}`, "invalid character '}' after an array element at byte offset 10"},
		{`{"spec":{"a":1]}`, "invalid character ']' after an object member at byte offset 14"},
		{`{"spec":{"a" 1}}`, "invalid character '1' after an object key at byte offset 13"},
		{`{"spec":{1:1}}`, "invalid character '1' looking for the beginning of an object key at byte offset 9"},
		{`{"spec":{"a":1,}}`, "invalid character '}' looking for the beginning of an object key at byte offset 15"},
		{`{"metadata":{"name":"a",}}`, "invalid character '}' looking for the beginning of an object key at byte offset 24"},
		{`{,}`, "invalid character ',' looking for the beginning of an object key at byte offset 1"},
		{tooDeep, "nesting deeper than 10000 levels at byte offset 10004"},
	}
	for _, tt := range tests {
		name := tt.in
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			_, err := Scan([]byte(tt.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Scan(%q) = %v, want a *SyntaxError", tt.in, err)
			}
			if got := strings.TrimPrefix(err.Error(), "rawobject: "); got != tt.want {
				t.Errorf("Scan(%q):\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if _, err := AppendCut(nil, []byte(tt.in)); err == nil {
				t.Errorf("AppendCut(%q) accepted it", tt.in)
			}
		})
	}
}

// TestPlain8 checks the eight-byte test against the byte table, for every
// byte value at every position, next to plain bytes and special ones.
func TestPlain8(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '~', '!', '[', 0x7f} {
		for c := range 256 {
			for p := range 8 {
				b := bytes.Repeat([]byte{fill}, 8)
				b[p] = byte(c)
				want := c < utf8.RuneSelf && plain[c]
				if got := plain8(binary.LittleEndian.Uint64(b)); got != want {
					t.Fatalf("plain8(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
}
