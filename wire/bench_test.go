package wire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/synthetic"
)

// BenchmarkMessageMarshalJSON writes the structured-mode event of a
// ConfigMap of about 1 KiB and of a Pod of about 10 KiB.
func BenchmarkMessageMarshalJSON(b *testing.B) {
	for _, tt := range []struct {
		name string
		obj  any
	}{
		{"ConfigMap", synthetic.Unstructured(synthetic.ConfigMap(7)).Object},
		{"Pod", synthetic.Unstructured(synthetic.Pod(7)).Object},
	} {
		b.Run(tt.name, func(b *testing.B) {
			obj, err := json.Marshal(tt.obj)
			if err != nil {
				b.Fatal(err)
			}
			m := namespacedMessage()
			m.Time = time.Date(2026, 11, 21, 8, 0, 0, 123456789, time.UTC)
			m.Data = append(append([]byte(`{"object":`), obj...), '}')
			b.SetBytes(int64(len(m.Data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPartitionFor finds the partition of a key among 10.
func BenchmarkPartitionFor(b *testing.B) {
	key := []byte("team-a/web-7d9f8b6c5d-x2k4p")
	b.ReportAllocs()
	for b.Loop() {
		_ = PartitionFor(key, 10)
	}
}
