package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/synthetic"
)

// rawUpdates are n updates of distinct objects that object makes, as the
// source's raw path hands them on: the object's JSON as the API server
// sends it, scanned.
func rawUpdates(tb testing.TB, r source.Resource, n int, object func(int) runtime.Object) []source.Delta {
	tb.Helper()
	observed := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	ds := make([]source.Delta, n)
	for i := range ds {
		obj := object(i)
		d := synthetic.Update(r, obj, observed)
		data, err := json.Marshal(obj)
		if err != nil {
			tb.Fatal(err)
		}
		meta, err := rawobject.Scan(data)
		if err != nil {
			tb.Fatal(err)
		}
		d.Object, d.Raw = nil, rawaccess.New(data, meta).(*source.RawObject)
		ds[i] = d
	}
	return ds
}

// BenchmarkPipelineEncoded is the pipeline's cost per delta with the
// bridge's encoder: BenchmarkPipeline's queueing and batching, plus
// writing each delta's event, for updates of distinct ConfigMaps (about
// 1 KiB) and Pods (about 10 KiB) as the source's raw path hands them on,
// 2,000 per run of the pipeline, to a sink that accepts everything at
// once. B/op and allocs/op are per run: per delta, divide by 2,000.
func BenchmarkPipelineEncoded(b *testing.B) {
	const perRun = 2_000
	for _, w := range []struct {
		name     string
		resource source.Resource
		object   func(int) runtime.Object
	}{
		{"ConfigMap", synthetic.ConfigMaps, func(i int) runtime.Object { return synthetic.ConfigMap(i) }},
		{"Pod", synthetic.Pods, func(i int) runtime.Object { return synthetic.Pod(i) }},
	} {
		b.Run(w.name, func(b *testing.B) {
			deltas := rawUpdates(b, w.resource, perRun, w.object)
			enc := event.Encoder{Cluster: "prod"}
			b.ReportAllocs()
			for b.Loop() {
				p := New(acceptAll{}, enc, discardRecorder{}, Options{}, slog.New(slog.DiscardHandler))
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { _ = p.Run(ctx) })
				for _, d := range deltas {
					p.OnDelta(d)
				}
				if err := p.Drain(context.Background()); err != nil {
					b.Fatal(err)
				}
				cancel()
				wg.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRun), "ns/delta")
		})
	}
}
