package rawobject

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// walking is m without the members Scan noted: its Extract and Project
// walk the whole object, as when an object has too many members.
func walking(m Meta) Meta {
	m.members = members{}
	return m
}

// memberList is where the members of m lie, as "key@offset:value@start-end"
// strings, or "none" when they are not noted.
func memberList(data []byte, m Meta) string {
	if !m.members.ok {
		return "none"
	}
	var b strings.Builder
	for _, mb := range m.members.at[:m.members.n] {
		name, _ := mb.name(data)
		fmt.Fprintf(&b, "%s@%d:%s;", name, mb.key, data[mb.value:mb.end])
	}
	return b.String()
}

func TestScanNotesMembers(t *testing.T) {
	nine := `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`
	for _, tt := range []struct{ in, want string }{
		{`{"kind":"Pod","metadata":{"name":"p"},"spec":{"a":[1]}}`, `kind@1:"Pod";metadata@14:{"name":"p"};spec@38:{"a":[1]};`},
		{" { \"a\" : [ 1 ] ,\n\"b\":null } \n", `a@3:[ 1 ];b@17:null;`},
		{`{}`, ``},
		{`{"":1,"a":{},"a":2}`, `@1:1;a@6:{};a@13:2;`},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}`, `a@1:1;b@7:2;c@13:3;d@19:4;e@25:5;f@31:6;g@37:7;h@43:8;`},
		{nine, `none`},
		{`{"a":1,"st\u0061tus":2}`, `none`},
		{`{"a":"\u003c","b":{"\u0041":1}}`, `a@1:"\u003c";b@14:{"\u0041":1};`},
	} {
		m, err := Scan([]byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := memberList([]byte(tt.in), m); got != tt.want {
			t.Errorf("Scan(%q) members\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
	if (Meta{}).members.ok {
		t.Error("the zero Meta has members noted")
	}
}

// The members of list items and of a watch event's object are offsets
// in the item's bytes, as for an object scanned alone.
func TestScanNotesNestedMembers(t *testing.T) {
	obj := `{"kind":"Pod","metadata":{"name":"p"},"status":{"phase":"Running"}}`
	want := memberList([]byte(obj), mustScan(t, obj))
	var got []string
	if _, err := ScanList([]byte(`{"items":[`+obj+`, `+obj+"]}"), func(data []byte, m Meta) error {
		got = append(got, memberList(data, m))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ev, err := ScanEvent([]byte(`{"type":"ADDED","object": ` + obj + `}`))
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, memberList(ev.Object, ev.Meta))
	for _, g := range got {
		if g != want {
			t.Errorf("nested members\n got %s\nwant %s", g, want)
		}
	}
}

func mustScan(tb testing.TB, s string) Meta {
	tb.Helper()
	m, err := Scan([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// garble overwrites the value of data's top-level member name, an object
// or a list, with brackets that do not match, so that a walk over it
// fails or goes astray, and returns the garbled copy.
func garble(tb testing.TB, data []byte, m Meta, name string) []byte {
	tb.Helper()
	out := bytes.Clone(data)
	for _, mb := range m.members.at[:m.members.n] {
		if n, _ := mb.name(data); string(n) == name {
			for i := mb.value + 1; i < mb.end-1; i++ {
				out[i] = "{[\"\\"[i%4]
			}
			return out
		}
	}
	tb.Fatalf("no member %s", name)
	return nil
}

// Meta.Extract and Meta.Project do not look at the members off their
// paths: garbled bytes there (which a walk would trip on) change
// nothing but the bytes copied.
func TestMetaMethodsPassOverOtherMembers(t *testing.T) {
	data := readFixture(t, "pod")
	m := mustScan(t, string(data))
	bad := garble(t, data, m, "spec")
	w := walking(m)
	if _, err := w.Extract(bad, treeOf(t, "status.phase")); err == nil {
		t.Fatal("walking the garbled object found no error: the test shows nothing")
	}
	got, err := m.Extract(bad, treeOf(t, "status.phase,metadata.labels"))
	if err != nil {
		t.Fatalf("Meta.Extract: %v", err)
	}
	want, _ := m.Extract(data, treeOf(t, "status.phase,metadata.labels"))
	if !reflect.DeepEqual(got, want) || got["status"].(map[string]any)["phase"] != "Running" {
		t.Errorf("Meta.Extract of the garbled object: %v, want %v", got, want)
	}
	p := &Projection{Drop: treeOf(t, "status")}
	out, meta, hash := m.Project(nil, bad, p)
	wantOut, _, _ := m.Project(nil, data, p)
	if len(out) != len(wantOut) || bytes.Equal(out, wantOut) || meta.Name != m.Name || hash == 0 {
		t.Errorf("Project of the garbled object: %d bytes, want %d, garbled", len(out), len(wantOut))
	}
	if out, _, _ := w.Project(nil, bad, p); len(out) != 0 {
		t.Errorf("walking Project of the garbled object gave %d bytes, want none: the test shows nothing", len(out))
	}
}

// The Meta methods give what the walks give, on the fixtures and on
// objects they walk (too many members, escaped keys).
func TestMetaMethodsAsWalks(t *testing.T) {
	inputs := [][]byte{
		readFixture(t, "pod"), readFixture(t, "configmap"),
		[]byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"status":{"phase":"x"},"metadata":{"name":"n","managedFields":[]}}`),
		[]byte(`{"st\u0061tus":{"phase":"x"},"metadata":{"managedFields":[],"name":"n"}}`),
		[]byte(` {"status":{"phase":"x"},"status":{"phase":"y"},"metadata":{"name":"n"},"metadata":{"uid":"u","managedFields":1}} `),
		[]byte(`{"metadata":{"managedFields":[],"labels":{"a":"b"},"managedFields":{},"resourceVersion":"3"},"status":5}`),
	}
	paths := []string{"status.phase", "metadata.labels,status", "metadata", "", "spec.containers[*].image"}
	for _, in := range inputs {
		m := mustScan(t, string(in))
		for _, ps := range paths {
			tree := treeOf(t, ps)
			got, err := m.Extract(in, tree)
			want, wantErr := Extract(in, tree)
			if err != nil || wantErr != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("Extract(%.40q, %q): Meta's %v, %v; the walk's %v, %v", in, ps, got, err, want, wantErr)
			}
			for _, p := range []*Projection{
				{Drop: tree}, {Keep: tree}, {Drop: tree, KeepManagedFields: true}, {Keep: tree, Drop: treeOf(t, "metadata.labels")},
			} {
				checkIndexedProjection(t, m, in, p)
			}
		}
	}
}

// checkIndexedProjection checks that m's Project of in by p is the walk's.
func checkIndexedProjection(t *testing.T, m Meta, in []byte, p *Projection) {
	t.Helper()
	out, meta, hash := m.Project(nil, in, p)
	w := walking(m)
	wantOut, wantMeta, wantHash := w.Project(nil, in, p)
	if !bytes.Equal(out, wantOut) || hash != wantHash {
		t.Fatalf("Project(%q, %+v)\n got %q %x\nwant %q %x (walking)", in, p, out, hash, wantOut, wantHash)
	}
	meta.members, wantMeta.members = members{}, members{}
	if !reflect.DeepEqual(meta, wantMeta) {
		t.Fatalf("Project(%q, %+v): Meta\n got %+v\nwant %+v (walking)", in, p, meta, wantMeta)
	}
	if h := m.Hash(in); h != w.Hash(in) {
		t.Fatalf("Hash(%q) = %x, walking %x", in, h, w.Hash(in))
	}
}
