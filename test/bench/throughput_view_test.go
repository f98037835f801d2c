package bench

import (
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/kubebus/bridge/internal/view"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/synthetic"
)

// viewScenario names the figures of BenchmarkThroughputView.
const viewScenario = "Pipeline throughput with a view"

// viewTarget is the least throughput with a view, as a share of the
// throughput without one, that the scenario holds the view to.
var viewTarget = AtLeast(0.9)

// viewCases are the views of the scenario, each next to no view at all.
// Every synthetic Pod is Running, so the filter lets every one through and
// both sides publish the same number of messages.
var viewCases = []struct {
	name                       string // as the figures name it
	filter, fields, dropFields string // BRIDGE_FILTER, BRIDGE_FIELDS, BRIDGE_DROP_FIELDS
}{
	{name: "CEL filter", filter: `resource != "pods" || object.status.phase != "Succeeded"`},
	{name: "BRIDGE_DROP_FIELDS=status", dropFields: "status"},
}

// newView compiles a view definition as the bridge does at start-up. A
// filter that fails on a benchmark object fails the benchmark: none
// should.
func newView(b *testing.B, filter, fields, dropFields string) source.View {
	b.Helper()
	cfg := loadConfig(b, map[string]string{"BRIDGE_FILTER": filter, "BRIDGE_FIELDS": fields, "BRIDGE_DROP_FIELDS": dropFields})
	return view.New(cfg.ViewDefinition(), failOnFilterError{b}, nil)
}

// failOnFilterError fails the benchmark on a failed evaluation.
type failOnFilterError struct{ b *testing.B }

func (f failOnFilterError) FilterError(resource string) {
	f.b.Errorf("view: the filter failed on an object of %s", resource)
}

// viewVia is what the source does with v to each update before it hands
// it on: it applies the view to the object and publishes the view's
// object with its state. An object outside the view is not handed on
// (every benchmark object is in it; one that is not fails the run).
func viewVia(b *testing.B, v source.View) func(*source.Delta) bool {
	return func(d *source.Delta) bool {
		r := v.Apply(d.Resource, d.Raw)
		if !r.In {
			b.Errorf("%s/%s is not in the view", d.Namespace, d.Name)
			return false
		}
		d.Raw, d.View = r.Object, r.State
		return true
	}
}

// BenchmarkThroughputView measures what a view costs the bridge's
// throughput: the Pods of the throughput scenario (~10 KiB each), every
// one through the view's Apply in the goroutine that hands deltas to the
// pipeline, as the source applies it, then through the pipeline to the
// bus; next to the same deltas without a view, in the same run.
func BenchmarkThroughputView(b *testing.B) {
	for _, newBus := range []func() throughputBus{
		func() throughputBus { return &natsBus{} },
		func() throughputBus { return &kafkaBus{} },
	} {
		for _, w := range throughputWorkloads {
			if w.resource != synthetic.Pods {
				continue
			}
			bus := newBus()
			b.Run(bus.Name()+"/"+w.kind, func(b *testing.B) {
				wl := buildWorkload(b, w.kind+" "+w.size, w.resource, w.count, w.object)
				bus.Prepare(b, wl)
				for _, vc := range viewCases {
					b.Run(vc.name, func(b *testing.B) {
						v := newView(b, vc.filter, vc.fields, vc.dropFields)
						measureViewThroughput(b, bus, wl, v, vc.name, vc.fields != "" || vc.dropFields != "")
					})
				}
			})
		}
	}
}

func measureViewThroughput(b *testing.B, bus throughputBus, wl *workload, v source.View, name string, projects bool) {
	loadAtEnd := quietRow(b)
	n := float64(len(wl.msgs))
	applyCost := checkView(b, v, wl, projects)
	viewed := *wl
	viewed.via = viewVia(b, v)
	run := func(name string, side func(b *testing.B) runResult) runResult { return measuredRun(b, name, n, side) }
	with := func(b *testing.B) runResult { return bus.Bridge(b, &viewed, false) }
	without := func(b *testing.B) runResult { return bus.Bridge(b, wl, false) }

	// The warm-up with the view checks, when it projects nothing, that the
	// bus holds the very messages the bridge publishes without it.
	run("warm-up-view", func(b *testing.B) runResult { return bus.Bridge(b, &viewed, !projects) })
	run("warm-up-no-view", without)
	withRuns, withoutRuns := alternate(run, "view-", with, "no-view-", without, func(withRuns, withoutRuns []runResult) bool {
		return anyUnclear(viewFigures(bus, wl, name, applyCost, withRuns, withoutRuns, ""))
	})
	if b.Failed() {
		return
	}
	for _, f := range viewFigures(bus, wl, name, applyCost, withRuns, withoutRuns, loadAtEnd()) {
		record(b, f)
	}
}

// viewFigures are the figures of a view's row from its runs: CPU per
// message first, then messages per second, which the view is held to.
// load describes the machine's load.
func viewFigures(bus throughputBus, wl *workload, name string, applyCost time.Duration, withRuns, withoutRuns []runResult, load string) []Figure {
	n := float64(len(wl.msgs))
	row := bus.Name() + ", " + wl.name + ", " + name
	withCPU, withoutCPU := cpusPerMsg(n, withRuns), cpusPerMsg(n, withoutRuns)
	c := Figure{
		Scenario:     viewScenario,
		Name:         row + ", CPU per message",
		Row:          row,
		Order:        0,
		Unit:         "µs/msg",
		Bridge:       median(withCPU),
		Baseline:     median(withoutCPU),
		BaselineName: "the bridge without a view",
		Note: fmt.Sprintf("user and system CPU of the whole process (the in-process broker included) per message, median of the same %d rounds as the row's msg/s (view %s µs, no view %s µs); %s",
			len(withRuns), list1(withCPU), list1(withoutCPU), load),
	}
	c.Spread(ratios(withCPU, withoutCPU))

	withRates, withoutRates := rates(n, withRuns), rates(n, withoutRuns)
	f := Figure{
		Scenario:     viewScenario,
		Name:         row,
		Row:          row,
		Order:        1,
		Unit:         "msg/s",
		Bridge:       median(withRates),
		Baseline:     median(withoutRates),
		BaselineName: "the bridge without a view",
	}
	f.Judge(viewTarget.String()+" baseline", viewTarget, f.Ratio(), ratios(withRates, withoutRates))
	f.Note = fmt.Sprintf("%d updates of distinct Pods, every one in the view, applied in the goroutine that feeds the pipeline (%.2f µs per object in Apply alone, measured apart); "+
		"median of %d alternating rounds, one run per side each, each run with a new server (view %s msg/s, no view %s msg/s); CPU of the whole process per message: view %.1f µs, no view %.1f µs; %s; %s",
		len(wl.msgs), applyCost.Seconds()*1e6, len(withRuns), list(withRates), list(withoutRates),
		c.Bridge, c.Baseline, bus.Settings(), load)
	return []Figure{c, f}
}

// checkView applies v to every object of wl once, outside the pipeline,
// and fails unless each is in the view, and, when v projects, unless the
// published object lacks status. It returns the mean time of one Apply.
func checkView(b *testing.B, v source.View, wl *workload, projects bool) time.Duration {
	b.Helper()
	goruntime.GC()
	start := time.Now()
	results := make([]source.ViewResult, len(wl.deltas))
	for i := range wl.deltas {
		results[i] = v.Apply(wl.deltas[i].Resource, wl.deltas[i].Raw)
	}
	took := time.Since(start)
	for i, r := range results {
		d := &wl.deltas[i]
		if !r.In || r.Object == nil {
			b.Fatalf("%s/%s is not in the view", d.Namespace, d.Name)
		}
		if !projects {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(r.Object.Data(), &obj); err != nil {
			b.Fatalf("%s/%s: the view's object: %v", d.Namespace, d.Name, err)
		}
		if _, ok := obj["status"]; ok {
			b.Fatalf("%s/%s: the view's object keeps the dropped status", d.Namespace, d.Name)
		}
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(len(wl.deltas))/1e3, "apply-µs/op")
	return took / time.Duration(len(wl.deltas))
}
