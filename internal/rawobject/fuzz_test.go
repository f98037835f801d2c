package rawobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// agreesWithJSON fails the test unless fn's verdict on in, err, agrees
// with encoding/json's, accepted, and an error is a *SyntaxError within
// in. It reports whether fn accepted in.
func agreesWithJSON(t *testing.T, fn string, in []byte, err error, accepted bool) bool {
	t.Helper()
	if err != nil {
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(in) {
			t.Fatalf("%s(%q): error %v is not a *SyntaxError within the input", fn, in, err)
		}
		if accepted {
			t.Fatalf("%s(%q): %v, but encoding/json accepts it", fn, in, err)
		}
		return false
	}
	if !accepted {
		t.Fatalf("%s(%q) accepted what encoding/json refuses", fn, in)
	}
	return true
}

// FuzzScan feeds Scan and AppendCut with arbitrary bytes. Neither may
// panic; each accepts exactly the objects encoding/json accepts, less
// those with invalid UTF-8 (see the package doc); and what they return
// agrees with encoding/json and the unstructured getters: the identity
// fields, and the cut object, compared as decoded values.
func FuzzScan(f *testing.F) {
	for _, fx := range fixtures {
		f.Add(readFixture(f, fx.name))
	}
	for _, s := range []string{
		`{}`, `{"kind":"Pod","metadata":{"name":"p","managedFields":[]}}`,
		`{"metadata":{"managedFields":1,"name":"a","managedFields":2}}`,
		`{"met\u0061data":{"n\u0061me":"\ud83d\ude00","m\u0061nagedFields":{}}}`,
		`{"metadata":{"name":"a"},"metadata":{"uid":"u"},"kind":1}`,
		`{"spec":[1e400,-0.0e-0,123456789012345678901234567890]}`,
		"{\"kind\":\"\xff\"}", "{\"kind\":\"\\ud800\"}", `{"metadata":{"deletionTimestamp":null}}`,
		`[]`, `null`, ` {"a":[{"b":[]}]} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Scan(in)
		cut, cutErr := AppendCut(nil, in)
		if (err == nil) != (cutErr == nil) {
			t.Fatalf("Scan: %v; AppendCut: %v", err, cutErr)
		}
		accepted := json.Valid(in) && utf8.Valid(in) && bytes.HasPrefix(bytes.TrimLeft(in, " \t\r\n"), []byte("{"))
		if !agreesWithJSON(t, "Scan", in, err, accepted) {
			return
		}
		want := decode(t, in)
		if got, exp := identity(m), identityOf(want); got != exp {
			t.Fatalf("Scan(%q)\n got %+v\nwant %+v", in, got, exp)
		}
		if n := m.CutLen(len(in)); n != len(cut) {
			t.Fatalf("CutLen = %d, AppendCut appended %d bytes", n, len(cut))
		}
		if again := m.AppendCut(nil, in); !bytes.Equal(again, cut) {
			t.Fatalf("Meta.AppendCut and AppendCut differ:\n%q\n%q", again, cut)
		}
		if md, ok := want["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
		if got := decode(t, cut); !reflect.DeepEqual(got, want) {
			t.Fatalf("AppendCut(%q) = %q, which decodes to\n%v\nwant\n%v", in, cut, got, want)
		}
		m2, err := Scan(cut)
		if err != nil {
			t.Fatalf("Scan of the cut %q: %v", cut, err)
		}
		if n := len(m2.ManagedFields(nil)); n != 0 || identity(m2) != identity(m) {
			t.Fatalf("Scan of the cut %q: %d managedFields spans, identity %+v, want none and %+v", cut, n, identity(m2), identity(m))
		}
	})
}

// decode is in decoded as encoding/json decodes it, numbers kept as
// written so that none is out of range.
func decode(t *testing.T, in []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return v
}

// ident is a Meta without its spans, comparable.
type ident struct {
	APIVersion, Kind, Namespace, Name, UID, ResourceVersion, DeletionTimestamp string
	HasDeletionTimestamp                                                       bool
}

func identity(m Meta) ident {
	return ident{m.APIVersion, m.Kind, m.Namespace, m.Name, m.UID, m.ResourceVersion, m.DeletionTimestamp, m.HasDeletionTimestamp}
}

// identityOf is what the unstructured getters read of v.
func identityOf(v map[string]any) ident {
	u := unstructured.Unstructured{Object: v}
	ts, found, err := unstructured.NestedString(v, "metadata", "deletionTimestamp")
	return ident{u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName(), string(u.GetUID()), u.GetResourceVersion(), ts, found && err == nil}
}
