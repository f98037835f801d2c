package checkpoint

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkFileCommitFirst commits 40,000 records of new objects to a new
// file in one flush, in the order they were acknowledged (namespaces
// interleaved), as the first flush after the first start does.
func BenchmarkFileCommitFirst(b *testing.B) {
	const objects = 40_000
	batch := make([]Record, objects)
	for i := range batch {
		batch[i] = put("configmaps", fmt.Sprintf("team-%02d/app-%07d-settings", i%40, i), "6f1c2d3e-0000-4000-8000-000000000000", strconv.Itoa(i))
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		f, _ := openTemp(b)
		b.StartTimer()
		if err := f.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*objects)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkWriterRecord hands the writer the records of one acknowledged
// batch of 500 deltas, as the pipeline does after every publish. Keys
// cycle over 100,000 objects.
func BenchmarkWriterRecord(b *testing.B) {
	const (
		batchSize = 500
		objects   = 100_000
	)
	w := NewWriter(Discard(), 0, nil)
	keys := make([]string, objects)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%03d/configmap-%06d", i%100, i)
	}
	batch := make([]Record, batchSize)
	rv := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			rv++
			batch[i] = put("configmaps", keys[rv%objects], "6f1c2d3e-0000-4000-8000-000000000000", "1000")
		}
		w.Record(batch...)
	}
}

// BenchmarkWriterFlush records the acknowledged updates of 40,000 objects
// the file already holds, in batches of 500 as the pipeline does, and
// flushes them to the file: one interval's worth of a busy cluster.
func BenchmarkWriterFlush(b *testing.B) {
	const (
		batchSize = 500
		objects   = 40_000
	)
	f, _ := openTemp(b)
	w := NewWriter(f, 0, nil)
	keys := make([]string, objects)
	for i := range keys {
		keys[i] = fmt.Sprintf("team-%02d/app-%07d-settings", i%40, i)
	}
	rvs := make([]string, 2*objects)
	for i := range rvs {
		rvs[i] = strconv.Itoa(1000 + i)
	}
	ctx := context.Background()
	batch := make([]Record, batchSize)
	round := 0
	flush := func() {
		for start := 0; start < objects; start += batchSize {
			for i := range batch {
				n := start + i
				batch[i] = put("configmaps", keys[n], "6f1c2d3e-0000-4000-8000-000000000000", rvs[(round%2)*objects+n])
			}
			w.Record(batch...)
		}
		round++
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	flush() // the file holds every object
	b.ReportAllocs()
	for b.Loop() {
		flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*objects), "ns/record")
}

// BenchmarkWriterRecordIntents has 4 workers each make the intents of a
// batch of 500 new objects durable and then record their acknowledged
// positions, as the pipeline's workers do in the initial sync of a
// cluster, where every object is created.
func BenchmarkWriterRecordIntents(b *testing.B) {
	const (
		workers   = 4
		batchSize = 500
	)
	f, _ := openTemp(b)
	w := NewWriter(f, 0, nil)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				first := next.Add(batchSize) - batchSize
				intents := make([]Intent, batchSize)
				recs := make([]Record, batchSize)
				for i := range intents {
					key := fmt.Sprintf("team-%02d/app-%07d-settings", (first+int64(i))%40, first+int64(i))
					intents[i] = Intent{Resource: "configmaps", Key: key, UID: "6f1c2d3e-0000-4000-8000-000000000000"}
					recs[i] = put("configmaps", key, intents[i].UID, strconv.FormatInt(first+int64(i)+1, 10))
				}
				if err := w.RecordIntents(ctx, intents...); err != nil {
					b.Error(err)
				}
				w.Record(recs...)
			})
		}
		wg.Wait()
	}
	st := w.Stats()
	b.ReportMetric(float64(st.Flushes)/float64(b.N*workers), "commits/batch")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*workers*batchSize), "ns/intent")
}
