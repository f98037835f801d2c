package event

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/synthetic"
)

// fixtures are objects as the API server sends them, managedFields
// included: internal/rawobject's ConfigMap of about 2 KiB and Pod of about
// 13 KiB.
var fixtures = []struct {
	name     string
	resource source.Resource
}{
	{"configmap", synthetic.ConfigMaps},
	{"pod", synthetic.Pods},
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "rawobject", "testdata", name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

var fixtureObserved = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// rawDelta is the update the source's raw path hands on for data: the
// object's bytes as sent, and what rawobject.Scan read of them.
func rawDelta(tb testing.TB, r source.Resource, data []byte) source.Delta {
	tb.Helper()
	m, err := rawobject.Scan(data)
	if err != nil {
		tb.Fatal(err)
	}
	return source.Delta{
		Type: source.Updated, Resource: r, Observed: fixtureObserved,
		Namespace: m.Namespace, Name: m.Name, UID: types.UID(m.UID), ResourceVersion: m.ResourceVersion,
		Raw: rawaccess.New(data, m).(*source.RawObject),
	}
}

// parsedDelta is the update the source's parsed path hands on for data:
// the object decoded into maps, as the dynamic client decodes it, with
// metadata.managedFields dropped unless kept.
func parsedDelta(tb testing.TB, r source.Resource, data []byte, keepManagedFields bool) source.Delta {
	tb.Helper()
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
	if err != nil {
		tb.Fatal(err)
	}
	u := obj.(*unstructured.Unstructured)
	if !keepManagedFields {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	return source.Delta{
		Type: source.Updated, Resource: r, Observed: fixtureObserved,
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		Object: u,
	}
}

// pathDelta is a delta of a fixture as one of the encoder's paths has it.
type pathDelta struct {
	name string
	d    source.Delta
}

// pathDeltas are the updates of data on each path the encoder writes: the
// raw object, the parsed one, and the identity alone (raw, content
// omitted).
func pathDeltas(tb testing.TB, r source.Resource, data []byte) []pathDelta {
	tb.Helper()
	omitted := rawDelta(tb, r, data)
	omitted.ContentOmitted = true
	return []pathDelta{
		{"raw", rawDelta(tb, r, data)},
		{"parsed", parsedDelta(tb, r, data, false)},
		{"raw, content omitted", omitted},
	}
}

// BenchmarkEvent writes the structured-mode event of an update as a sink
// sends it (Encode, then MarshalJSON) for objects as the API server sends
// them: raw is the delta of the source's raw path (the object's bytes,
// copied once without managedFields), parsed the one of its parsed path
// (the object decoded into maps, encoded again). Bytes are the event's.
func BenchmarkEvent(b *testing.B) {
	enc := Encoder{Cluster: "prod"}
	for _, fx := range fixtures {
		data := readFixture(b, fx.name)
		paths := []struct {
			name  string
			delta source.Delta
		}{
			{"raw", rawDelta(b, fx.resource, data)},
			{"parsed", parsedDelta(b, fx.resource, data, false)},
		}
		for _, p := range paths {
			b.Run(fx.name+"/"+p.name, func(b *testing.B) {
				d := p.delta
				m, err := enc.Encode(&d)
				if err != nil {
					b.Fatal(err)
				}
				ev, _ := m.MarshalJSON()
				b.SetBytes(int64(len(ev)))
				b.ReportAllocs()
				for b.Loop() {
					m, err := enc.Encode(&d)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.MarshalJSON(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkLeasedEvent is BenchmarkEvent as the pipeline writes events:
// into a buffer lent by the pool (Lease), given back once sent (Release).
func BenchmarkLeasedEvent(b *testing.B) {
	enc := Encoder{Cluster: "prod"}
	for _, fx := range fixtures {
		data := readFixture(b, fx.name)
		for _, p := range pathDeltas(b, fx.resource, data)[:2] {
			b.Run(fx.name+"/"+p.name, func(b *testing.B) {
				d := p.d
				m, err := enc.Encode(&d)
				if err != nil {
					b.Fatal(err)
				}
				ev, _ := m.MarshalJSON()
				b.SetBytes(int64(len(ev)))
				b.ReportAllocs()
				for b.Loop() {
					l, err := enc.Lease(&d)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := l.Message().MarshalJSON(); err != nil {
						b.Fatal(err)
					}
					l.Release()
				}
			})
		}
	}
}
