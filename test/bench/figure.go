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
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	// Row groups the figures one set of runs measured, e.g. a throughput
	// row's CPU per message and its messages per second; the report lists
	// them together, by Order. Empty, the figure is a row of its own,
	// named Name.
	Row string `json:"row,omitempty"`
	// Order places the figure within its row, the lowest first.
	Order int `json:"order,omitempty"`
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
	// With a Verdict it is true only when the verdict is VerdictMet.
	Met bool `json:"met"`
	// Verdict is VerdictMet, VerdictNotMet or VerdictUnclear, set by
	// Judge; figures saved without one are judged by Met (see Outcome).
	Verdict string `json:"verdict,omitempty"`
	// Rounds is how many rounds the figure was measured in, each a run of
	// the bridge paired with a run of the baseline; 0 for a figure
	// measured once.
	Rounds int `json:"rounds,omitempty"`
	// SpreadLow and SpreadHigh are the least and the greatest per-round
	// value of the quantity the target is on (bridge ÷ baseline of each
	// round, bridge − baseline for a Difference figure, or the bridge's
	// own value where the target names the bridge); meaningful only with
	// Rounds.
	SpreadLow  float64 `json:"spreadLow,omitempty"`
	SpreadHigh float64 `json:"spreadHigh,omitempty"`
	// Note adds context: sample sizes, settings.
	Note string `json:"note,omitempty"`
	// Difference compares by Bridge − Baseline rather than by their ratio,
	// for figures such as latencies whose target is a margin.
	Difference bool `json:"difference,omitempty"`
}

// The verdicts of a figure on its target.
const (
	VerdictMet    = "met"
	VerdictNotMet = "not met"
	// VerdictUnclear is a figure whose rounds disagree: some meet the
	// target, some do not, so the spread across rounds reaches across it
	// and the noise of the machine is larger than the distance between
	// the figure and its target.
	VerdictUnclear = "unclear"
)

// Bound is a target on a quantity: at least, or at most, Limit.
type Bound struct {
	Limit  float64
	AtMost bool
}

// AtLeast is the target "≥ limit".
func AtLeast(limit float64) Bound { return Bound{Limit: limit} }

// AtMost is the target "≤ limit".
func AtMost(limit float64) Bound { return Bound{Limit: limit, AtMost: true} }

// Holds reports whether v meets the bound.
func (t Bound) Holds(v float64) bool {
	if t.AtMost {
		return v <= t.Limit
	}
	return v >= t.Limit
}

// String is the bound in words, e.g. "≥ 1.0×" or "≤ 1.25×".
func (t Bound) String() string {
	op := "≥"
	if t.AtMost {
		op = "≤"
	}
	limit := strconv.FormatFloat(t.Limit, 'f', -1, 64)
	if !strings.Contains(limit, ".") {
		limit += ".0"
	}
	return op + " " + limit + "×"
}

// Judge holds f to target, worded as text: value is the quantity the
// target is on (f.Ratio(), or the bridge's own value), perRound the same
// quantity in each round, none for a figure measured once. It sets
// Target, Rounds, the spread, Verdict and Met: unclear when the rounds
// disagree on the target, or agree but value does not (a difference of
// two percentiles taken over every round need not lie between the
// rounds'), else whether value meets it.
func (f *Figure) Judge(text string, target Bound, value float64, perRound []float64) {
	f.Target = text
	f.Rounds = len(perRound)
	f.SpreadLow, f.SpreadHigh = 0, 0
	f.Verdict = VerdictNotMet
	if target.Holds(value) {
		f.Verdict = VerdictMet
	}
	if len(perRound) > 0 {
		f.SpreadLow, f.SpreadHigh = slices.Min(perRound), slices.Max(perRound)
		low, high := target.Holds(f.SpreadLow), target.Holds(f.SpreadHigh)
		if low != high || low != target.Holds(value) {
			f.Verdict = VerdictUnclear
		}
	}
	f.Met = f.Verdict == VerdictMet
}

// Spread records, for a figure without a target, the rounds it was
// measured in and the least and greatest of perRound, each round's
// bridge ÷ baseline (bridge − baseline for a Difference figure).
func (f *Figure) Spread(perRound []float64) {
	f.Rounds = len(perRound)
	if len(perRound) > 0 {
		f.SpreadLow, f.SpreadHigh = slices.Min(perRound), slices.Max(perRound)
	}
}

// Outcome is the verdict on f's target: its Verdict, or for a figure
// judged by Met alone (as figures saved before verdicts were), met or not
// met; empty without a target.
func (f Figure) Outcome() string {
	switch {
	case f.Target == "":
		return ""
	case f.Verdict != "":
		return f.Verdict
	case f.Met:
		return VerdictMet
	default:
		return VerdictNotMet
	}
}

// RowName is the row f is listed in: its Row, or its Name.
func (f Figure) RowName() string {
	if f.Row != "" {
		return f.Row
	}
	return f.Name
}

// Compare orders figures as the report lists them: by scenario, then by
// row, then by their order within the row, then by name.
func Compare(a, b Figure) int {
	return cmp.Or(
		strings.Compare(a.Scenario, b.Scenario),
		strings.Compare(a.RowName(), b.RowName()),
		cmp.Compare(a.Order, b.Order),
		strings.Compare(a.Name, b.Name),
	)
}

// SpreadText is the spread across rounds in words, e.g. "0.912–1.071
// over 5 rounds"; empty for a figure measured once.
func (f Figure) SpreadText() string {
	if f.Rounds == 0 {
		return ""
	}
	return fmt.Sprintf("%s over %d rounds", f.SpreadRange(), f.Rounds)
}

// SpreadRange is the least and the greatest per-round value, e.g.
// "0.912–1.071", or for a Difference figure "+0.41–+2.30 ms"; empty for a
// figure measured once.
func (f Figure) SpreadRange() string {
	switch {
	case f.Rounds == 0:
		return ""
	case f.Difference:
		return fmt.Sprintf("%+.2f–%+.2f %s", f.SpreadLow, f.SpreadHigh, f.Unit)
	default:
		return fmt.Sprintf("%.3f–%.3f", f.SpreadLow, f.SpreadHigh)
	}
}

// Summary is f in one line, as a benchmark logs it.
func (f Figure) Summary() string {
	compared := fmt.Sprintf("ratio %.3f", f.Ratio())
	if f.Difference {
		compared = fmt.Sprintf("difference %+.1f %s", f.Bridge-f.Baseline, f.Unit)
	}
	if s := f.SpreadText(); s != "" {
		compared += " (" + s + ")"
	}
	verdict := ""
	if v := f.Outcome(); v != "" {
		verdict = " — target " + f.Target + ": " + v
	}
	return fmt.Sprintf("%s, %s: bridge %.4g %s, %s %.4g %s, %s%s", f.Scenario, f.Name, f.Bridge, f.Unit,
		f.BaselineName, f.Baseline, f.Unit, compared, verdict)
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
