package bench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestFigureJudge(t *testing.T) {
	for _, c := range []struct {
		name     string
		target   Bound
		value    float64
		perRound []float64
		want     string
		wantLow  float64
		wantHigh float64
	}{
		{"once, met", AtLeast(1), 1.02, nil, VerdictMet, 0, 0},
		{"once, not met", AtLeast(1), 0.98, nil, VerdictNotMet, 0, 0},
		{"every round meets", AtLeast(1), 1.1, []float64{1.05, 1.2, 1.1}, VerdictMet, 1.05, 1.2},
		{"no round meets", AtLeast(1), 0.8, []float64{0.85, 0.7, 0.8}, VerdictNotMet, 0.7, 0.85},
		{"rounds straddle", AtLeast(1), 1.02, []float64{0.95, 1.02, 1.1}, VerdictUnclear, 0.95, 1.1},
		{"at most, met", AtMost(1.25), 1.1, []float64{1.0, 1.2, 1.1}, VerdictMet, 1.0, 1.2},
		{"at most, straddle", AtMost(1.25), 1.2, []float64{1.1, 1.3, 1.2}, VerdictUnclear, 1.1, 1.3},
		{"a round on the limit meets it", AtMost(1.05), 1.0, []float64{1.05, 0.9}, VerdictMet, 0.9, 1.05},
		// A margin on two p99s: the pooled p99s can meet it while every
		// window misses, and the other way round.
		{"every round misses, the pooled value meets", AtMost(2), -7, []float64{3, 3}, VerdictUnclear, 3, 3},
		{"every round meets, the pooled value misses", AtLeast(1), 0.98, []float64{1.01, 1.05}, VerdictUnclear, 1.01, 1.05},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f Figure
			f.Judge(c.target.String(), c.target, c.value, c.perRound)
			if f.Verdict != c.want || f.Outcome() != c.want || f.Met != (c.want == VerdictMet) {
				t.Errorf("verdict %q, outcome %q, met %v; want %q", f.Verdict, f.Outcome(), f.Met, c.want)
			}
			if f.Rounds != len(c.perRound) || f.SpreadLow != c.wantLow || f.SpreadHigh != c.wantHigh {
				t.Errorf("%d rounds, spread %v–%v; want %d, %v–%v", f.Rounds, f.SpreadLow, f.SpreadHigh, len(c.perRound), c.wantLow, c.wantHigh)
			}
			if (f.SpreadText() == "") != (len(c.perRound) == 0) {
				t.Errorf("spread text %q with %d rounds", f.SpreadText(), len(c.perRound))
			}
		})
	}
}

// A latency figure's target is a margin over its baseline: its rounds are
// each window's difference, and its spread reads as one.
func TestFigureDifferenceSpread(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	windows := []latencyWindow{{}, {}, {}}
	for i := range 100 {
		// Window 0: the bridge 1 ms behind; window 1: 3 ms behind at its
		// slowest; window 2: level.
		windows[0].add(ms(float64(i)), ms(float64(i)+1))
		windows[1].add(ms(float64(i)), ms(float64(i)+float64(i/98)*3))
		windows[2].add(ms(float64(i)), ms(float64(i)))
	}
	windows = append(windows, latencyWindow{}) // a window without samples is no round
	diffs := latencyWindowDiffs(windows, 0.99)
	if want := []float64{1, 3, 0}; !slices.Equal(diffs, want) {
		t.Fatalf("p99 differences %v, want %v", diffs, want)
	}
	f := Figure{Unit: "ms", Bridge: 12, Baseline: 10.5, Difference: true}
	f.Judge("≤ baseline + 2 ms", AtMost(2), f.Bridge-f.Baseline, diffs)
	if f.Verdict != VerdictUnclear || f.SpreadRange() != "+0.00–+3.00 ms" || f.SpreadText() != "+0.00–+3.00 ms over 3 rounds" {
		t.Errorf("verdict %q, spread %q / %q", f.Verdict, f.SpreadRange(), f.SpreadText())
	}
}

func TestFigureBoundString(t *testing.T) {
	for b, want := range map[Bound]string{AtLeast(1): "≥ 1.0×", AtLeast(0.9): "≥ 0.9×", AtMost(1.25): "≤ 1.25×", AtMost(1.05): "≤ 1.05×"} {
		if got := b.String(); got != want {
			t.Errorf("%+v: %q, want %q", b, got, want)
		}
	}
}

// A figure saved before verdicts and spreads is judged by Met and shows no
// spread.
func TestFigureLoadsOlderFields(t *testing.T) {
	dir := t.TempDir()
	older := `{"scenario":"S","name":"a","unit":"msg/s","bridge":2,"baseline":1,"baselineName":"b","target":"≥ 0.9× baseline","met":true}`
	if err := os.WriteFile(filepath.Join(dir, "s-a.json"), []byte(older), 0o644); err != nil {
		t.Fatal(err)
	}
	judged := Figure{Scenario: "S", Name: "b", Unit: "msg/s", Bridge: 1, Baseline: 1}
	judged.Judge("≥ 1.0× baseline", AtLeast(1), 1, []float64{0.9, 1.1})
	if err := judged.Save(dir); err != nil {
		t.Fatal(err)
	}
	fs, err := LoadFigures(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(fs, Compare)
	if len(fs) != 2 {
		t.Fatalf("%d figures, want 2", len(fs))
	}
	if fs[0].Outcome() != VerdictMet || fs[0].SpreadText() != "" {
		t.Errorf("older figure: outcome %q, spread %q", fs[0].Outcome(), fs[0].SpreadText())
	}
	if fs[1].Outcome() != VerdictUnclear || fs[1].SpreadText() != "0.900–1.100 over 2 rounds" {
		t.Errorf("judged figure: outcome %q, spread %q", fs[1].Outcome(), fs[1].SpreadText())
	}
	b, _ := json.Marshal(fs[1])
	var back Figure
	if err := json.Unmarshal(b, &back); err != nil || back != fs[1] {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

// A row's figures are listed by their order in the row, whatever their
// names, and rows by their names.
func TestFigureCompareOrdersRows(t *testing.T) {
	fs := []Figure{
		{Scenario: "T", Name: "NATS, Pods", Row: "NATS, Pods", Order: 1},
		{Scenario: "T", Name: "NATS, Pods, CPU per message", Row: "NATS, Pods", Order: 0},
		{Scenario: "T", Name: "Kafka, Pods", Row: "Kafka, Pods", Order: 1},
		{Scenario: "T", Name: "Kafka, Pods, CPU per message", Row: "Kafka, Pods", Order: 0},
		{Scenario: "T", Name: "NATS"},
		{Scenario: "A", Name: "Z"},
	}
	slices.SortStableFunc(fs, Compare)
	var got []string
	for _, f := range fs {
		got = append(got, f.Name)
	}
	want := []string{"Z", "Kafka, Pods, CPU per message", "Kafka, Pods", "NATS", "NATS, Pods, CPU per message", "NATS, Pods"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

func TestFigureWaitQuiet(t *testing.T) {
	p := QuietPolicy{Limit: 1, Readings: 3, Every: time.Millisecond, Bound: 50 * time.Millisecond}
	readings := func(loads ...float64) func() (float64, error) {
		return func() (float64, error) {
			v := loads[0]
			if len(loads) > 1 {
				loads = loads[1:]
			}
			return v, nil
		}
	}
	if q := p.WaitQuiet(context.Background(), readings(1.5, 0.5, 0.4, 1.2, 0.9, 0.8, 0.7, 5)); !q.Quiet || q.Load != 0.7 {
		t.Errorf("quiet after a spike: %+v, want quiet at 0.7", q)
	}
	if q := p.WaitQuiet(context.Background(), readings(1.5)); q.Quiet || q.Load != 1.5 || q.Waited < p.Bound-p.Every {
		t.Errorf("never quiet: %+v, want not quiet after about %s", q, p.Bound)
	}
	if q := p.WaitQuiet(context.Background(), func() (float64, error) { return 0, errors.New("no load") }); q.Quiet || q.Load != -1 {
		t.Errorf("unreadable: %+v", q)
	}
	if v, err := parseLoadAverage("0.42 1.10 1.34 2/93 20684\n"); err != nil || v != 0.42 {
		t.Errorf("parse: %v, %v", v, err)
	}
}
