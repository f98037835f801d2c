package rawobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubebus/bridge/internal/jsonenc"
)

// decodedPath is what the bridge does with an object's JSON without this
// package: the dynamic client's decoder turns it into maps, the source
// drops metadata.managedFields from them, and internal/event encodes the
// maps back into JSON (jsonenc.AppendValue is its appendObject).
func decodedPath(dst, data []byte) ([]byte, *unstructured.Unstructured, error) {
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
	if err != nil {
		return dst, nil, err
	}
	u := obj.(*unstructured.Unstructured)
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	dst, err = jsonenc.AppendValue(dst, u.Object)
	return dst, u, err
}

// rawPath is the same with this package: the identity read, and the
// object copied once, without metadata.managedFields.
func rawPath(dst, data []byte) ([]byte, Meta, error) {
	m, err := Scan(data)
	if err != nil {
		return dst, m, err
	}
	return m.AppendCut(dst, data), m, nil
}

// TestRawPathAgreesWithDecodedPath checks, on the benchmarks' fixtures,
// that both paths give the same identity and the same object, compared as
// decoded values.
func TestRawPathAgreesWithDecodedPath(t *testing.T) {
	for _, fx := range fixtures {
		data := readFixture(t, fx.name)
		dec, u, err := decodedPath(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		raw, m, err := rawPath(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := identity(m), identityOf(u.Object); got != want {
			t.Errorf("%s: identity %+v, want %+v", fx.name, got, want)
		}
		if bytes.Contains(raw, []byte(`"managedFields"`)) || !bytes.Contains(data, []byte(`"managedFields"`)) {
			t.Errorf("%s: managedFields not cut, or the fixture lacks it", fx.name)
		}
		if got, want := decode(t, raw), decode(t, dec); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the raw path gives\n%s\nthe decoded path\n%s", fx.name, raw, dec)
		}
	}
}

// BenchmarkObject turns an object's JSON, as the API server sends it, into
// its identity and the JSON an event carries, without managedFields: raw
// is this package, decoded the path through maps it replaces, side by
// side. Bytes are the object's as sent.
func BenchmarkObject(b *testing.B) {
	paths := []struct {
		name string
		run  func(dst, data []byte) ([]byte, error)
	}{
		{"raw", func(dst, data []byte) ([]byte, error) { dst, _, err := rawPath(dst, data); return dst, err }},
		{"decoded", func(dst, data []byte) ([]byte, error) { dst, _, err := decodedPath(dst, data); return dst, err }},
	}
	for _, fx := range fixtures {
		data := readFixture(b, fx.name)
		for _, p := range paths {
			b.Run(fx.name+"/"+p.name, func(b *testing.B) {
				buf := make([]byte, 0, len(data))
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if buf, err = p.run(buf[:0], data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkScan validates an object and reads its identity.
func BenchmarkScan(b *testing.B) {
	benchFixtures(b, func(data []byte) error {
		_, err := Scan(data)
		return err
	})
}

// benchFixtures runs op on each fixture, a sub-benchmark each, with the
// fixture's bytes as its throughput.
func benchFixtures(b *testing.B, op func(data []byte) error) {
	for _, fx := range fixtures {
		data := readFixture(b, fx.name)
		b.Run(fx.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := op(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendCut copies a scanned object without its managedFields.
func BenchmarkAppendCut(b *testing.B) {
	for _, fx := range fixtures {
		data, m := scannedFixture(b, fx.name)
		b.Run(fx.name, func(b *testing.B) {
			buf := make([]byte, 0, len(data))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				buf = m.AppendCut(buf[:0], data)
			}
		})
	}
}

// BenchmarkValid is encoding/json's validation of the same bytes, for
// scale: a floor for any validating scan.
func BenchmarkValid(b *testing.B) {
	benchFixtures(b, func(data []byte) error {
		if !json.Valid(data) {
			return errors.New("invalid")
		}
		return nil
	})
}

// TestAllocations holds Scan to one allocation, for the strings it
// returns, and the cut to none.
func TestAllocations(t *testing.T) {
	for _, fx := range fixtures {
		data, m := scannedFixture(t, fx.name)
		buf := make([]byte, 0, len(data))
		for _, c := range []struct {
			name string
			want float64
			run  func()
		}{
			{"Scan", 1, func() { _, _ = Scan(data) }},
			{"Meta.AppendCut", 0, func() { buf = m.AppendCut(buf[:0], data) }},
			{"AppendCut", 0, func() { buf, _ = AppendCut(buf[:0], data) }},
			{"Scan without strings", 0, func() { _, _ = Scan([]byte(`{"metadata":{"managedFields":[]},"spec":{"a":[1,"b"]}}`)) }},
		} {
			if got := testing.AllocsPerRun(20, c.run); got != c.want {
				t.Errorf("%s of %s: %v allocations, want %v", c.name, fx.name, got, c.want)
			}
		}
	}
}
