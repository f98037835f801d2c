package bench

import (
	"fmt"
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
	verdict := ""
	if f.Target != "" {
		verdict = " — target " + f.Target + ": missed"
		if f.Met {
			verdict = " — target " + f.Target + ": met"
		}
	}
	compared := fmt.Sprintf("ratio %.3f", f.Ratio())
	if f.Difference {
		compared = fmt.Sprintf("difference %+.1f %s", f.Bridge-f.Baseline, f.Unit)
	}
	b.Logf("%s, %s: bridge %.4g %s, %s %.4g %s, %s%s", f.Scenario, f.Name, f.Bridge, f.Unit,
		f.BaselineName, f.Baseline, f.Unit, compared, verdict)
	if dir := os.Getenv(ResultsEnv); dir != "" {
		if err := f.Save(dir); err != nil {
			b.Fatal(err)
		}
	}
}
