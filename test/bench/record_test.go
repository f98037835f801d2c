package bench

import (
	"os"
	"strings"
	"testing"
)

// record reports f as benchmark metrics and, when the results directory is
// set, saves it for the report.
func record(b *testing.B, f Figure) {
	b.Helper()
	unit := strings.NewReplacer(" ", "_", "/", "_per_").Replace(f.Unit)
	b.ReportMetric(f.Bridge, "bridge-"+unit)
	b.ReportMetric(f.Baseline, "baseline-"+unit)
	verdict := ""
	if f.Target != "" {
		verdict = " — target " + f.Target + ": missed"
		if f.Met {
			verdict = " — target " + f.Target + ": met"
		}
	}
	b.Logf("%s, %s: bridge %.4g %s, %s %.4g %s, ratio %.3f%s", f.Scenario, f.Name, f.Bridge, f.Unit,
		f.BaselineName, f.Baseline, f.Unit, f.Ratio(), verdict)
	if dir := os.Getenv(ResultsEnv); dir != "" {
		if err := f.Save(dir); err != nil {
			b.Fatal(err)
		}
	}
}
