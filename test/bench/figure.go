// Package bench measures what the bridge costs on top of the broker clients
// and client-go, side by side with a baseline in the same run.
//
// The scenarios are Go benchmarks in this package, each run once
// (-benchtime=1x) because each is a whole experiment: it sets up real
// servers, measures the bridge and its baseline, and records a Figure per
// measured quantity. The benchreport command runs them, plus the
// micro-benchmarks of the hot path, and writes docs/benchmarks.md.
//
// The machine is shared and noisy, so every figure is a ratio of two
// measurements taken in the same run, never an absolute number compared
// with a constant.
package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ResultsEnv names the directory scenarios write their figures to. When it
// is unset, figures are only reported as benchmark metrics.
const ResultsEnv = "BENCH_RESULTS"

// Figure is one measured quantity: the bridge's value, the baseline's value
// measured in the same run, and the target it is held to.
type Figure struct {
	// Scenario groups figures, e.g. "Pipeline throughput".
	Scenario string `json:"scenario"`
	// Name says what was measured, e.g. "NATS JetStream, 4 KiB messages".
	Name string `json:"name"`
	// Unit of Bridge and Baseline, e.g. "msg/s", "ms", "MiB", "B/object".
	Unit     string  `json:"unit"`
	Bridge   float64 `json:"bridge"`
	Baseline float64 `json:"baseline"`
	// BaselineName says what the baseline is, e.g. "nats.go async publish".
	BaselineName string `json:"baselineName"`
	// Target is the goal in words, e.g. "≥ 0.9× baseline"; empty for
	// figures reported without a target.
	Target string `json:"target,omitempty"`
	// Met reports whether the target holds; ignored without a Target.
	Met bool `json:"met"`
	// Note adds context: sample sizes, settings.
	Note string `json:"note,omitempty"`
	// Difference compares by Bridge − Baseline rather than by their ratio,
	// for figures such as latencies whose target is a margin.
	Difference bool `json:"difference,omitempty"`
}

// Ratio is Bridge / Baseline, or 0 when the baseline is 0.
func (f Figure) Ratio() float64 {
	if f.Baseline == 0 {
		return 0
	}
	return f.Bridge / f.Baseline
}

// Save writes f as JSON into dir, under a name made from its scenario and
// name.
func (f Figure) Save(dir string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	name := unsafeChars.ReplaceAllString(strings.ToLower(f.Scenario+"-"+f.Name), "-")
	return os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644)
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// LoadFigures reads every figure saved in dir.
func LoadFigures(dir string) ([]Figure, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Figure
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f Figure
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, f)
	}
	return out, nil
}
