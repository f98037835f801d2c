package pipeline

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

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

// BenchmarkPipelineCheckpoint is BenchmarkPipeline with the checkpoint the
// bridge runs: a checkpoint.Writer on a bbolt file records what the sink
// accepted and makes the intents of creations durable, and each run of
// 10,000 deltas ends with a flush, as an interval's does. Updates: every
// delta an update of a distinct object; Creations: every delta the
// creation of an object, as in the first sync of a cluster, each batch
// waiting for its intents.
func BenchmarkPipelineCheckpoint(b *testing.B) {
	const perRun = 10_000
	for _, typ := range []source.DeltaType{source.Updated, source.Added} {
		name := map[source.DeltaType]string{source.Updated: "Updates", source.Added: "Creations"}[typ]
		b.Run(name, func(b *testing.B) {
			store, err := checkpoint.OpenFile(filepath.Join(b.TempDir(), "checkpoint.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			w := checkpoint.NewWriter(store, time.Hour, nil)
			msg := &wire.Message{}
			enc := encodeFunc(func(*source.Delta) (*wire.Message, error) { return msg, nil })
			run := 0
			deltas := make([]source.Delta, perRun)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for i := range deltas {
					n := strconv.Itoa(run*perRun + i)
					deltas[i] = mkDelta(typ, "cm-"+n, "uid-"+n, run*perRun+i+1)
				}
				run++
				b.StartTimer()
				p := New(acceptAll{}, enc, w, Options{Intents: w}, slog.New(slog.DiscardHandler))
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
				if err := w.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRun), "ns/delta")
			b.ReportMetric(0, "ns/op")
		})
	}
}
