package rawobject

import (
	"slices"
	"testing"
)

func TestAppendCutLeavesOutManagedFields(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"first", `{"metadata":{"managedFields":[{"manager":"m"}],"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{"middle", `{"metadata":{"name":"a","managedFields":[],"uid":"u"}}`, `{"metadata":{"name":"a","uid":"u"}}`},
		{"last", `{"metadata":{"name":"a","managedFields":[]},"spec":{}}`, `{"metadata":{"name":"a"},"spec":{}}`},
		{"only", `{"metadata":{"managedFields":[{"a":{"b":[1,2]}}]}}`, `{"metadata":{}}`},
		{"none", `{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{"whitespace kept", "{ \"metadata\" : { \"name\" : 1 , \"managedFields\" : [ ] , \"uid\" : 2 } }\n", "{ \"metadata\" : { \"name\" : 1 , \"uid\" : 2 } }\n"},
		{"last with whitespace", "{\"metadata\":{\"name\":1 , \"managedFields\":null }}", "{\"metadata\":{\"name\":1 }}"},
		{"only with whitespace", "{\"metadata\":{ \"managedFields\":null }}", "{\"metadata\":{  }}"},
		{"escaped key", `{"metadata":{"name":"a","m\u0061nagedFields":[]}}`, `{"metadata":{"name":"a"}}`},
		{"duplicates in a row", `{"metadata":{"managedFields":1,"managedFields":2,"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{"duplicates at the end", `{"metadata":{"name":"a","managedFields":1,"managedFields":2}}`, `{"metadata":{"name":"a"}}`},
		{"duplicates only", `{"metadata":{"managedFields":1,"managedFields":2}}`, `{"metadata":{}}`},
		{"duplicates apart", `{"metadata":{"managedFields":1,"name":"a","managedFields":2,"uid":"u","managedFields":3}}`, `{"metadata":{"name":"a","uid":"u"}}`},
		{"in every metadata", `{"metadata":{"managedFields":1},"metadata":{"name":"a","managedFields":2}}`, `{"metadata":{},"metadata":{"name":"a"}}`},
		{"not elsewhere", `{"managedFields":1,"spec":{"metadata":{"managedFields":2}}}`, `{"managedFields":1,"spec":{"metadata":{"managedFields":2}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, err := AppendCut([]byte("prefix:"), in)
			if err != nil {
				t.Fatalf("AppendCut(%s): %v", tt.in, err)
			}
			if string(got) != "prefix:"+tt.want {
				t.Errorf("AppendCut(%s)\n got %s\nwant %s", tt.in, got[len("prefix:"):], tt.want)
			}
			m, err := Scan(in)
			if err != nil {
				t.Fatal(err)
			}
			if n := m.CutLen(len(in)); n != len(tt.want) {
				t.Errorf("CutLen = %d, want %d", n, len(tt.want))
			}
			// The spans, left out by hand, give the same bytes.
			var kept []byte
			done := 0
			for _, sp := range m.ManagedFields(nil) {
				kept = append(kept, in[done:sp.Start]...)
				done = sp.End
			}
			kept = append(kept, in[done:]...)
			if string(kept) != tt.want {
				t.Errorf("leaving out ManagedFields spans gives %s, want %s", kept, tt.want)
			}
		})
	}
}

func TestManagedFieldsSpansAreInOrder(t *testing.T) {
	m, err := Scan([]byte(`{"metadata":{"managedFields":1,"name":"a","managedFields":2,"uid":"u","managedFields":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := m.ManagedFields(nil)
	want := []Span{{13, 31}, {42, 60}, {69, 87}}
	if !slices.Equal(got, want) {
		t.Errorf("ManagedFields = %v, want %v", got, want)
	}
}
