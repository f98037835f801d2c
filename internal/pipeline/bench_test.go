package pipeline

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// acceptAll is a sink that accepts every message at once.
type acceptAll struct{}

func (acceptAll) Publish(context.Context, []*wire.Message) error { return nil }
func (acceptAll) Close(context.Context) error                    { return nil }

// discardRecorder drops what it is given.
type discardRecorder struct{}

func (discardRecorder) Record(...checkpoint.Record) {}

// BenchmarkPipeline is the pipeline's own cost per delta: queueing by
// object, batching, handing batches between goroutines, order bookkeeping
// and acknowledgement, with a sink that accepts everything at once and an
// encoder that returns a ready message. Each delta is an update of a
// distinct object, 10,000 per run of the pipeline.
func BenchmarkPipeline(b *testing.B) {
	const perRun = 10_000
	deltas := make([]source.Delta, perRun)
	for i := range deltas {
		deltas[i] = mkDelta(source.Updated, "cm-"+strconv.Itoa(i), "uid-"+strconv.Itoa(i), 2)
	}
	msg := &wire.Message{}
	enc := encodeFunc(func(*source.Delta) (*wire.Message, error) { return msg, nil })
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
	b.ReportMetric(0, "ns/op")
}
