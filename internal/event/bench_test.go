package event

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/synthetic"
)

// benchDeltas are updates of a ConfigMap of about 1 KiB and a Pod of about
// 10 KiB, as the source hands them on.
var benchDeltas = []struct {
	name  string
	delta func() source.Delta
}{
	{"ConfigMap", func() source.Delta { return benchUpdate(synthetic.ConfigMaps, synthetic.ConfigMap(7)) }},
	{"Pod", func() source.Delta { return benchUpdate(synthetic.Pods, synthetic.Pod(7)) }},
}

func benchUpdate(r source.Resource, obj runtime.Object) source.Delta {
	return synthetic.Update(r, obj, time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
}

// BenchmarkEncode turns a delta into a message: the object to JSON, the
// event id and the attributes.
func BenchmarkEncode(b *testing.B) {
	enc := Encoder{Cluster: "prod"}
	for _, bd := range benchDeltas {
		b.Run(bd.name, func(b *testing.B) {
			d := bd.delta()
			m, err := enc.Encode(&d)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(m.Data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.Encode(&d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkID hashes a delta's identity into its event id.
func BenchmarkID(b *testing.B) {
	d := benchDeltas[0].delta()
	b.ReportAllocs()
	for b.Loop() {
		_ = ID(&d)
	}
}
