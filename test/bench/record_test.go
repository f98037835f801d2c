package bench

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`[^a-z0-9]+`)

// record reports f as benchmark metrics and, when the results directory is
// set, saves it for the report.
func record(b *testing.B, f Figure) {
	b.Helper()
	// Metric names must be unique within a benchmark: one benchmark may
	// record several figures in the same unit.
	name := metricName.ReplaceAllString(strings.ToLower(f.Name+"-"+f.Unit), "_")
	b.ReportMetric(f.Bridge, "bridge-"+name)
	b.ReportMetric(f.Baseline, "baseline-"+name)
	b.Log(f.Summary())
	if dir := os.Getenv(ResultsEnv); dir != "" {
		if err := f.Save(dir); err != nil {
			b.Fatal(err)
		}
	}
}
