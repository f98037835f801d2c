package rawobject

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestProject(t *testing.T) {
	const lastApplied = `"kubectl.kubernetes.io/last-applied-configuration":"{\"kind\":\"Pod\"}"`
	tests := []struct {
		name, keep, drop string
		keepMF           bool
		in, want         string
	}{
		{name: "nothing: managedFields cut", in: `{"kind":"Pod","metadata":{"name":"p","managedFields":[{"m":1}],"uid":"u"},"spec":{"a":1}}`,
			want: `{"kind":"Pod","metadata":{"name":"p","uid":"u"},"spec":{"a":1}}`},
		{name: "keep managedFields", keepMF: true, in: `{"metadata":{"managedFields":[],"name":"p"}}`, want: `{"metadata":{"managedFields":[],"name":"p"}}`},
		{name: "drop status", drop: "status", in: `{"kind":"Pod","metadata":{"name":"p"},"spec":{"a":1},"status":{"phase":"Running"}}`,
			want: `{"kind":"Pod","metadata":{"name":"p"},"spec":{"a":1}}`},
		{name: "drop the first member", drop: "spec", in: `{"spec":{},"kind":"Pod"}`, want: `{"kind":"Pod"}`},
		{name: "drop every member", drop: "spec,status", in: `{"spec":{},"status":1}`, want: `{}`},
		{name: "drop an absent member", drop: "status", in: `{"spec":{}}`, want: `{"spec":{}}`},
		{name: "drop the last-applied annotation, last", drop: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
			in:   `{"metadata":{"name":"p","annotations":{"a":"1",` + lastApplied + `},"uid":"u"}}`,
			want: `{"metadata":{"name":"p","annotations":{"a":"1"},"uid":"u"}}`},
		{name: "drop the last-applied annotation, first", drop: `metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']`,
			in:   `{"metadata":{"annotations":{` + lastApplied + `,"a":"1","b":"2"}}}`,
			want: `{"metadata":{"annotations":{"a":"1","b":"2"}}}`},
		{name: "drop the last-applied annotation, only", drop: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
			in:   `{"metadata":{"annotations":{` + lastApplied + `}}}`,
			want: `{"metadata":{"annotations":{}}}`},
		{name: "drop metadata keeps identity", drop: "metadata",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{},"name":"p","namespace":"n","generateName":"x","uid":"u","resourceVersion":"1","deletionTimestamp":"t","managedFields":[]}}`,
			want: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","uid":"u","resourceVersion":"1","deletionTimestamp":"t"}}`},
		{name: "identity is kept even when dropped", drop: "apiVersion,kind,metadata.name", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
			want: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`},
		{name: "drop managedFields, kept otherwise", drop: "metadata.managedFields", keepMF: true, in: `{"metadata":{"name":"p","managedFields":[]}}`,
			want: `{"metadata":{"name":"p"}}`},
		{name: "drop in every item", drop: "spec.containers[*].resources",
			in:   `{"spec":{"containers":[{"name":"a","resources":{}},{"resources":1,"name":"b"},"odd"]}}`,
			want: `{"spec":{"containers":[{"name":"a"},{"name":"b"},"odd"]}}`},
		{name: "drop every item", drop: "spec.containers[*]", in: `{"spec":{"containers":[1,2],"x":1}}`, want: `{"spec":{"containers":[],"x":1}}`},
		{name: "drop under a list by name: nothing", drop: "spec.containers.resources", in: `{"spec":{"containers":[{"resources":1}]}}`,
			want: `{"spec":{"containers":[{"resources":1}]}}`},
		{name: "keep", keep: "spec.replicas", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"a":"b"},"resourceVersion":"7"},"spec":{"replicas":3,"template":{}},"status":{}}`,
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","resourceVersion":"7"},"spec":{"replicas":3}}`},
		{name: "keep a label", keep: "metadata.labels.app", in: `{"metadata":{"name":"d","labels":{"app":"x","b":"y"},"annotations":{}},"spec":{}}`,
			want: `{"metadata":{"name":"d","labels":{"app":"x"}}}`},
		{name: "keep metadata whole, less managedFields", keep: "metadata", in: `{"metadata":{"name":"d","managedFields":[],"labels":{}},"spec":{}}`,
			want: `{"metadata":{"name":"d","labels":{}}}`},
		{name: "keep in every item", keep: "spec.containers[*].image,status.phase",
			in:   `{"kind":"Pod","spec":{"containers":[{"name":"a","image":"i"},{"name":"b"},"odd",[1]],"x":1},"status":{"phase":"Running","ip":"1"}}`,
			want: `{"kind":"Pod","spec":{"containers":[{"image":"i"},{}]},"status":{"phase":"Running"}}`},
		{name: "keep where the path cannot go", keep: "spec.x.y,status[*],a.b", in: `{"spec":{"x":[1]},"status":{},"a":{}}`,
			want: `{"spec":{},"a":{}}`},
		{name: "keep and drop", keep: "spec", drop: "spec.secret", in: `{"spec":{"a":1,"secret":2},"status":{}}`, want: `{"spec":{"a":1}}`},
		{name: "metadata that is not an object", keep: "spec", in: `{"metadata":"x","spec":1}`, want: `{"spec":1}`},
		{name: "empty containers", drop: "a.b", in: `{"a":{},"b":[],"metadata":{}}`, want: `{"a":{},"b":[],"metadata":{}}`},
		{name: "whitespace stays, but around the object", drop: "b",
			in: " { \"a\" : [ 1 , 2 ] , \"b\" : 1 , \"metadata\" : { \"name\" : \"p\" } } \n", want: `{ "a" : [ 1 , 2 ] , "metadata" : { "name" : "p" } }`},
		{name: "HTML escapes written as characters", drop: "b",
			in: `{"a\u003c":"\u003ctag\u003e \u0026 \\u003c \u00e9","b":1}`, want: `{"a<":"<tag> & \\u003c \u00e9"}`},
		{name: "escaped keys match", drop: "status", in: `{"st\u0061tus":1,"x":2}`, want: `{"x":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			m, err := Scan(in)
			if err != nil {
				t.Fatal(err)
			}
			p := &Projection{Keep: treeOf(t, tt.keep), Drop: treeOf(t, tt.drop), KeepManagedFields: tt.keepMF}
			out, meta, hash := m.Project([]byte("prefix:"), in, p)
			if string(out) != "prefix:"+tt.want {
				t.Errorf("Project\n got %s\nwant %s", out[min(len(out), 7):], tt.want)
			}
			checkProjection(t, m, out[7:], meta, hash, tt.keepMF)
		})
	}
}

// checkProjection checks what Project returned besides the bytes.
func checkProjection(t *testing.T, m Meta, out []byte, meta Meta, hash uint64, keepMF bool) {
	t.Helper()
	m2, err := Scan(out)
	if err != nil {
		t.Fatalf("Scan of the projection %q: %v", out, err)
	}
	if identity(meta) != identity(m) || identity(m2) != identity(m) {
		t.Errorf("identity: returned %+v, scanned %+v, want %+v", identity(meta), identity(m2), identity(m))
	}
	if !meta.plain || !m2.plain {
		t.Errorf("plain: returned %v, scanned %v, want true", meta.plain, m2.plain)
	}
	if meta.members.ok && meta.members != m2.members {
		t.Errorf("members of the projection: returned %s, scanned %s", memberList(out, meta), memberList(out, m2))
	}
	if m.members.ok && m.plain && !meta.members.ok {
		t.Errorf("members of the projection not noted; scanned %s", memberList(out, m2))
	}
	if got, want := meta.AppendCut(nil, out), m2.AppendCut(nil, out); !bytes.Equal(got, want) {
		t.Errorf("the returned spans cut %q to %q; Scan's to %q", out, got, want)
	}
	if !keepMF && len(meta.ManagedFields(nil)) != 0 {
		t.Errorf("managedFields spans %v, want none", meta.ManagedFields(nil))
	}
	if n := meta.CutLen(len(out)); n != len(m2.AppendCut(nil, out)) {
		t.Errorf("CutLen = %d, want %d", n, len(m2.AppendCut(nil, out)))
	}
	if !keepMF {
		if want := m2.Hash(out); hash != want {
			t.Errorf("hash %x, want %x, Hash of the projection", hash, want)
		}
		if got := meta.Hash(out); got != hash {
			t.Errorf("Hash of the projection with the Meta returned: %x, want %x", got, hash)
		}
	}
}

func TestProjectHash(t *testing.T) {
	base := `{"kind":"Pod","metadata":{"name":"p","resourceVersion":"41","managedFields":[{"manager":"a"}],"labels":{"app":"x"}},"spec":{"n":1},"status":{"phase":"Running"}}`
	hash := func(s string, p *Projection) uint64 {
		in := []byte(s)
		m, err := Scan(in)
		if err != nil {
			t.Fatal(err)
		}
		_, _, h := m.Project(nil, in, p)
		if p == nil {
			if h2 := m.Hash(in); h2 != h {
				t.Errorf("Hash(%s) = %x, Project's hash %x", s, h2, h)
			}
		}
		return h
	}
	dropStatus := &Projection{Drop: treeOf(t, "status")}
	for _, p := range []*Projection{nil, dropStatus} {
		h := hash(base, p)
		for _, same := range []string{
			strings.Replace(base, `"41"`, `"42"`, 1),
			strings.Replace(base, `{"manager":"a"}`, `{"manager":"b"}`, 1),
			strings.Replace(base, `"managedFields":[{"manager":"a"}],`, ``, 1),
			strings.Replace(base, `"resourceVersion":"41",`, ``, 1),
			strings.Replace(base, `"name":"p","resourceVersion":"41",`, `"resourceVersion":"41","name":"p",`, 1),
		} {
			if got := hash(same, p); got != h {
				t.Errorf("projection %v: hash of\n%s\n%x, want %x as for\n%s", p, same, got, h, base)
			}
		}
		for _, other := range []string{
			strings.Replace(base, `"app":"x"`, `"app":"y"`, 1),
			strings.Replace(base, `"n":1`, `"n":2`, 1),
			strings.Replace(base, `"name":"p"`, `"name":"q"`, 1),
			strings.Replace(base, `{"n":1}`, `{"n":1,"m":2}`, 1),
			strings.Replace(base, `"kind":"Pod",`, ``, 1),
		} {
			if got := hash(other, p); got == h {
				t.Errorf("projection %v: hash of\n%s\nis the same as for\n%s", p, other, base)
			}
		}
	}
	// Status-only changes are no change with status dropped.
	if hash(base, dropStatus) != hash(strings.Replace(base, "Running", "Succeeded", 1), dropStatus) {
		t.Error("a status change changes the hash with status dropped")
	}
	if hash(base, nil) == hash(strings.Replace(base, "Running", "Succeeded", 1), nil) {
		t.Error("a status change leaves the hash as it was without a projection")
	}
	// The hash is of the projection less its resourceVersion member.
	if got, want := hash(`{"metadata":{"name":"p","resourceVersion":"5"}}`, nil), xxhash.Sum64String(`{"metadata":{"name":"p"}}`); got != want {
		t.Errorf("hash %x, want %x", got, want)
	}
	for in, want := range map[string]string{
		`{"metadata":{"resourceVersion":"5","name":"p"}}`:                                  `{"metadata":{"name":"p"}}`,
		`{"metadata":{"resourceVersion":"5"}}`:                                             `{"metadata":{}}`,
		`{"metadata":{"name":"p","resourceVersion":"5","managedFields":[]}}`:               `{"metadata":{"name":"p"}}`,
		`{"metadata":{"managedFields":[],"resourceVersion":"5"},"a":1}`:                    `{"metadata":{},"a":1}`,
		`{"metadata":{"resourceVersion":"5","uid":"u","managedFields":1,"x":2}}`:           `{"metadata":{"uid":"u","x":2}}`,
		`{"metadata":{"a":1,"resourceVersion":"5","b":2,"resourceVersion":"6"}}`:           `{"metadata":{"a":1,"b":2}}`,
		` { "metadata" : { "a" : 1 , "resourceVersion" : "5" } , "b" : "\u003c" } ` + "\n": `{ "metadata" : { "a" : 1 } , "b" : "<" }`,
		`{"spec":{"resourceVersion":"5"}}`:                                                 `{"spec":{"resourceVersion":"5"}}`,
	} {
		if got := hash(in, nil); got != xxhash.Sum64String(want) {
			t.Errorf("hash of %s is not that of %s", in, want)
		}
	}
}

// TestProjectFixtures holds the projections the bridge makes most to the
// reference on the fixtures, and the hash to rule out what it should.
func TestProjectFixtures(t *testing.T) {
	for _, fx := range fixtures {
		data, m := scannedFixture(t, fx.name)
		for _, c := range []struct{ keep, drop string }{
			{}, {drop: "status"}, {drop: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`},
			{drop: "metadata"}, {keep: "spec.containers[*].image,status.phase"}, {keep: "data", drop: "status,metadata.labels"},
		} {
			p := &Projection{Keep: treeOf(t, c.keep), Drop: treeOf(t, c.drop)}
			out, meta, hash := m.Project(nil, data, p)
			if got, want := decode(t, out), refProject(decode(t, data), p); !reflect.DeepEqual(got, want) {
				t.Errorf("%s keep %q drop %q:\n got %v\nwant %v", fx.name, c.keep, c.drop, got, want)
			}
			checkProjection(t, m, out, meta, hash, false)
		}
		rv := []byte(`"resourceVersion":"` + m.ResourceVersion + `",`)
		if bytes.Count(data, rv) != 1 {
			t.Fatalf("%s: want one %s", fx.name, rv)
		}
		if got, want := m.Hash(data), xxhash.Sum64(bytes.TrimSpace(bytes.Replace(m.AppendCutUnescapingHTML(nil, data), rv, nil, 1))); got != want {
			t.Errorf("%s: Hash %x, want %x", fx.name, got, want)
		}
	}
}

// FuzzProject feeds Project and Hash with arbitrary bytes and paths.
// Neither may panic; on what Scan accepts, the projection is valid JSON
// that decodes to what the reference makes of the input (objects with
// duplicate keys aside), with the identity of the input, the Meta and
// the hash Project returns are right, and Hash agrees with Project.
func FuzzProject(f *testing.F) {
	for _, fx := range fixtures {
		f.Add(readFixture(f, fx.name), "", `status,metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`, false)
		f.Add(readFixture(f, fx.name), "spec.containers[*].image,data", "", true)
	}
	for _, s := range []struct {
		in, keep, drop string
		keepMF         bool
	}{
		{`{"kind":"Pod","metadata":{"resourceVersion":"1","managedFields":[],"name":"p"},"spec":{"a":[{"b":1,"c":2}]}}`, "spec.a[*].b", "", false},
		{`{"metadata":{"managedFields":[],"resourceVersion":"1","managedFields":{},"resourceVersion":"2","x":1}}`, "", "metadata.x", true},
		{`{"metadata":{"managedFields":1,"resourceVersion":"1"}}`, "", "", true},
		{`{"a":"\u003c\\u003e","metadata":{"n\u0061me":"\u0026"}}`, "", "b", false},
		{` { "a" : [ 1 , { "b" : 2 } ] , "c" : 3 } `, "a[*].b,c", "", false},
		{`{"metadata":5,"x":{"y":[[1]]}}`, "x.y[*][*]", "metadata", false},
		{`{"a":{"b":`, "a.b", "", false},
		{`{"a":[1,}`, "", "a[*].x", false},
		{`{"metadata":{"resourceVersion":"1"}}`, "", "metadata", false},
	} {
		f.Add([]byte(s.in), s.keep, s.drop, s.keepMF)
	}
	f.Fuzz(func(t *testing.T, in []byte, keep, drop string, keepMF bool) {
		kp, err := ParsePaths(keep)
		if err != nil {
			return
		}
		dp, err := ParsePaths(drop)
		if err != nil {
			return
		}
		p := &Projection{KeepManagedFields: keepMF}
		if kp != nil {
			p.Keep = NewTree(kp)
		}
		if dp != nil {
			p.Drop = NewTree(dp)
		}
		m, scanErr := Scan(in)
		out, meta, hash := m.Project([]byte("x"), in, p)
		h := m.Hash(in)
		if len(in) > 1 {
			// With a Meta of other bytes: unspecified, but no panic.
			m.Project(nil, in[1:], p)
			m.Project(nil, in[:len(in)-1], p)
		}
		if scanErr != nil {
			return // unspecified, but it neither panicked nor looped
		}
		// The members Scan noted make no difference but in speed.
		checkIndexedProjection(t, m, in, p)
		if out[0] != 'x' {
			t.Fatalf("Project overwrote dst: %q", out)
		}
		out = out[1:]
		checkProjection(t, m, out, meta, hash, keepMF)
		if !hasDuplicateKeys(t, in) {
			if got, want := decode(t, out), refProject(decode(t, in), p); !reflect.DeepEqual(got, want) {
				t.Fatalf("Project(%q, keep %q, drop %q) = %s, which decodes to\n%v\nwant\n%v", in, keep, drop, out, got, want)
			}
		}
		whole, _, wholeHash := m.Project(nil, in, nil)
		if h != wholeHash {
			t.Fatalf("Hash(%q) = %x, Project's hash %x", in, h, wholeHash)
		}
		// Projecting the projection again changes nothing.
		m2, _ := Scan(whole)
		if again, _, againHash := m2.Project(nil, whole, nil); !bytes.Equal(again, whole) || againHash != wholeHash || m2.Hash(whole) != h {
			t.Fatalf("Project(%q) = %q, projected again %q", in, whole, again)
		}
		// Without managedFields, the input hashes the same.
		cut := m.AppendCut(nil, in)
		if mc, err := Scan(cut); err != nil || mc.Hash(cut) != h {
			t.Fatalf("Hash of %q without managedFields (%q) differs", in, cut)
		}
	})
}
