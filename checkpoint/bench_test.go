package checkpoint

import (
	"context"
	"fmt"
	"strconv"
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
