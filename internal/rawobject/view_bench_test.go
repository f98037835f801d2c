package rawobject

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// withLastApplied is data with a kubectl.kubernetes.io/last-applied-
// configuration annotation first in its metadata.annotations, as kubectl
// apply writes it: the object as applied, JSON in a string.
func withLastApplied(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		tb.Fatal(err)
	}
	md := obj["metadata"].(map[string]any)
	for _, k := range []string{"managedFields", "uid", "resourceVersion", "creationTimestamp", "generateName", "ownerReferences"} {
		delete(md, k)
	}
	delete(obj, "status")
	applied, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	value, err := json.Marshal(string(applied) + "\n")
	if err != nil {
		tb.Fatal(err)
	}
	const at = `"annotations":{`
	i := bytes.Index(data, []byte(at))
	if i < 0 {
		tb.Fatal("no annotations")
	}
	i += len(at)
	out := append([]byte(nil), data[:i]...)
	out = append(out, `"kubectl.kubernetes.io/last-applied-configuration":`...)
	out = append(out, value...)
	out = append(out, ',')
	return append(out, data[i:]...)
}

// BenchmarkExtract decodes what a filter reads of an object: status.phase
// (BRIDGE_FILTER='object.status.phase != "Running"'), metadata.labels
// (a filter on labels), or all of it (a filter that uses object whole),
// with Meta.Extract, as the view does; walk is the same with Extract,
// which walks the whole object, and decoded the same read through the
// unstructured decoder, for scale. Bytes are the object's as sent.
func BenchmarkExtract(b *testing.B) {
	phase := NewTree([]Path{{{Name: "status"}, {Name: "phase"}}})
	labels := NewTree([]Path{{{Name: "metadata"}, {Name: "labels"}}})
	all := NewTree([]Path{{}})
	for _, fx := range fixtures {
		data, m := scannedFixture(b, fx.name)
		for _, c := range []struct {
			name string
			run  func() error
		}{
			{"status.phase", func() error { _, err := m.Extract(data, phase); return err }},
			{"status.phase/walk", func() error { _, err := Extract(data, phase); return err }},
			{"labels", func() error { _, err := m.Extract(data, labels); return err }},
			{"labels/walk", func() error { _, err := Extract(data, labels); return err }},
			{"whole", func() error { _, err := m.Extract(data, all); return err }},
			{"status.phase/decoded", func() error {
				obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
				if err == nil {
					_, _, err = unstructured.NestedString(obj.(*unstructured.Unstructured).Object, "status", "phase")
				}
				return err
			}},
		} {
			b.Run(fx.name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if err := c.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkProject writes an object's projection and its hash: status
// dropped (BRIDGE_DROP_FIELDS=status), and the last-applied annotation
// dropped from the object with one; cut is the object with only
// managedFields left out, and Hash its hash without writing it; walk is
// a projection without the members Scan noted, walking the whole
// object. Bytes are the object's as sent.
func BenchmarkProject(b *testing.B) {
	dropStatus := &Projection{Drop: NewTree([]Path{{{Name: "status"}}})}
	dropApplied := &Projection{Drop: NewTree([]Path{{{Name: "metadata"}, {Name: "annotations"}, {Name: "kubectl.kubernetes.io/last-applied-configuration"}}})}
	for _, fx := range fixtures {
		plain := readFixture(b, fx.name)
		applied := withLastApplied(b, plain)
		for _, c := range []struct {
			name string
			data []byte
			p    *Projection
			walk bool
		}{
			{"drop-status", plain, dropStatus, false},
			{"drop-status/walk", plain, dropStatus, true},
			{"drop-last-applied", applied, dropApplied, false},
			{"cut", plain, nil, false},
		} {
			m, err := Scan(c.data)
			if err != nil {
				b.Fatal(err)
			}
			if c.walk {
				m = walking(m)
			}
			b.Run(fx.name+"/"+c.name, func(b *testing.B) {
				buf := make([]byte, 0, len(c.data))
				b.SetBytes(int64(len(c.data)))
				b.ReportAllocs()
				for b.Loop() {
					buf, _, _ = m.Project(buf[:0], c.data, c.p)
				}
			})
		}
		m, err := Scan(plain)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fx.name+"/Hash", func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				m.Hash(plain)
			}
		})
	}
}

// TestViewAllocations holds Extract of status.phase to its result's
// allocations, and Project and Hash to none when the buffer has room.
func TestViewAllocations(t *testing.T) {
	data, m := scannedFixture(t, "pod")
	buf := make([]byte, 0, len(data))
	phase := NewTree([]Path{{{Name: "status"}, {Name: "phase"}}})
	p := &Projection{Drop: NewTree([]Path{{{Name: "status"}}})}
	w := walking(m)
	for _, c := range []struct {
		name string
		want float64
		run  func()
	}{
		// Two maps (their headers and their first groups), the string and
		// its interface value.
		{"Extract status.phase", 6, func() { _, _ = Extract(data, phase) }},
		{"Meta.Extract status.phase", 6, func() { _, _ = m.Extract(data, phase) }},
		{"Project", 0, func() { buf, _, _ = m.Project(buf[:0], data, p) }},
		{"Project into no buffer", 1, func() { _, _, _ = m.Project(nil, data, p) }},
		{"Project walking into no buffer", 1, func() { _, _, _ = w.Project(nil, data, p) }},
		{"Hash", 0, func() { m.Hash(data) }},
	} {
		if got := testing.AllocsPerRun(20, c.run); got != c.want {
			t.Errorf("%s: %v allocations, want %v", c.name, got, c.want)
		}
	}
}

// TestLastAppliedDropped checks the benchmark's case does what it says.
func TestLastAppliedDropped(t *testing.T) {
	for _, fx := range fixtures {
		plain := readFixture(t, fx.name)
		applied := withLastApplied(t, plain)
		m, err := Scan(applied)
		if err != nil {
			t.Fatal(err)
		}
		p := &Projection{Drop: treeOf(t, `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`)}
		out, _, hash := m.Project(nil, applied, p)
		mp, _ := Scan(plain)
		want, _, wantHash := mp.Project(nil, plain, nil)
		if !bytes.Equal(out, want) || hash != wantHash {
			t.Errorf("%s: dropping the annotation gives\n%s\nwant\n%s", fx.name, out, want)
		}
	}
}
