package consumer

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkTableMemory reports the heap a ListerWatcher's per-key state
// takes for 10,000 objects, per object.
func BenchmarkTableMemory(b *testing.B) {
	const n = 10000
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = rec("added", obj{ns: "default", name: fmt.Sprintf("configmap-%05d", i),
			uid: fmt.Sprintf("6ba7b810-9dad-11d1-80b4-%012d", i), rv: 1000 + i})
	}
	opts := testOptions()
	var perKey float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tab := newTable(&opts)
		for _, r := range recs {
			tab.apply(r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perKey = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tab)
	}
	b.ReportMetric(perKey, "B/key")
}
