package pipeline

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
)

// TestStopCountsEveryDelta stops Run while deltas are still being handed
// to the pipeline, many times over, some objects getting a delta while
// their last batch is in flight: every delta is then published, collapsed
// into a later one, or counted abandoned, none lost uncounted.
func TestStopCountsEveryDelta(t *testing.T) {
	const (
		rounds  = 200
		deltas  = 200
		objects = 13
	)
	for round := range rounds {
		s := &sinktest.Recorder{}
		p := newHarness(t, s, Options{Workers: 2, BatchSize: 8}, nil).p
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- p.Run(ctx) }()
		var handing sync.WaitGroup
		handing.Go(func() {
			for i := range deltas {
				if i == deltas/2+round%(deltas/2) {
					cancel()
				}
				typ := source.Updated
				if i < objects {
					typ = source.Added
				}
				o := strconv.Itoa(i % objects)
				p.OnDelta(mkDelta(typ, "cm-"+o, "uid-"+o, i+1))
			}
		})
		handing.Wait()
		<-ran
		st := p.Stats()
		if n := st.Published + st.Coalesced + st.Abandoned; n != deltas {
			t.Fatalf("round %d: %d published, %d collapsed and %d abandoned of %d deltas: %d lost uncounted",
				round, st.Published, st.Coalesced, st.Abandoned, deltas, deltas-n)
		}
	}
}
