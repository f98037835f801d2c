// Command benchreport runs the bridge's benchmark suite and writes the
// figures as a markdown report (docs/benchmarks.md from `make bench`).
//
// It runs the scenario benchmarks of test/bench once each, then the
// micro-benchmarks of the hot path with -benchmem, and writes both, with the
// machine's description and the commands that produced them. With -from
// DIR it runs no scenario and writes the report from the figures a run
// saved in DIR (BENCH_RESULTS=DIR go test -run '^$' -bench ... ./test/bench),
// e.g. to look at a few rows: -from DIR -micro=false -out /tmp/report.md.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/kubebus/bridge/test/bench"
)

// microPackages hold the micro-benchmarks of the hot path.
var microPackages = []string{
	"./internal/event",
	"./internal/jsonenc",
	"./internal/rawobject",
	"./internal/filter",
	"./internal/view",
	"./internal/pipeline",
	"./wire",
	"./sink/nats",
	"./sink/kafka",
	"./checkpoint/...",
}

func main() {
	out := flag.String("out", "docs/benchmarks.md", "report to write")
	run := flag.String("bench", ".", "which scenario benchmarks to run (a go test -bench pattern)")
	micro := flag.Bool("micro", true, "run the micro-benchmarks too")
	from := flag.String("from", "", "write the report from the figures saved in this directory (a "+bench.ResultsEnv+" directory) instead of running the scenarios")
	flag.Parse()
	if err := report(*out, *run, *micro, *from); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func report(out, pattern string, micro bool, from string) error {
	began := time.Now()
	scenarioArgs := []string{"test", "-run", "^$", "-bench", pattern, "-benchtime", "1x", "-count", "1", "-timeout", "90m", "./test/bench"}
	dir := from
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bench-results-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if _, err := goCmd(scenarioArgs, bench.ResultsEnv+"="+dir); err != nil {
			return fmt.Errorf("scenarios: %w", err)
		}
	}
	figures, err := bench.LoadFigures(dir)
	if err != nil {
		return err
	}
	var microOut []byte
	microArgs := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1"}, microPackages...)
	if micro {
		if microOut, err = goCmd(microArgs); err != nil {
			return fmt.Errorf("micro-benchmarks: %w", err)
		}
	}

	took := time.Since(began)
	if from != "" {
		// The scenarios ran before; their time is not known.
		took = 0
	}
	var b bytes.Buffer
	writeReport(&b, bench.ThisMachine(), figures, scenarioArgs, microArgs, microOut, took)
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d figures)\n", out, len(figures))
	for _, f := range figures {
		switch f.Outcome() {
		case bench.VerdictNotMet:
			fmt.Printf("target missed: %s, %s: %s\n", f.Scenario, f.Name, f.Target)
		case bench.VerdictUnclear:
			fmt.Printf("target unclear: %s, %s: %s, rounds spread %s\n", f.Scenario, f.Name, f.Target, f.SpreadText())
		}
	}
	return nil
}

// goCmd runs the go command with args, its output shown as it runs, and
// returns its standard output.
func goCmd(args []string, env ...string) ([]byte, error) {
	fmt.Println("go", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stdout, &stdout)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	return stdout.Bytes(), err
}

func writeReport(w io.Writer, m bench.Machine, figures []bench.Figure, scenarioArgs, microArgs []string, micro []byte, took time.Duration) {
	fmt.Fprintf(w, "# Benchmarks\n\n")
	written := "Written by `make bench`"
	if took > 0 {
		written += fmt.Sprintf(" (%s)", took.Round(time.Second))
	}
	fmt.Fprintf(w, "%s. Every figure is the bridge next to a baseline measured in the same run on the same machine, compared as bridge ÷ baseline, or for latencies as bridge − baseline.\n\n", written)
	fmt.Fprintf(w, "Machine: %d CPUs (%s), %.1f GiB memory, %s %s/%s.\n\n", m.CPUs, orUnknown(m.CPUModel), m.MemoryGiB, m.GoVersion, m.OS, m.Arch)
	fmt.Fprintf(w, "To rerun: `make bench`, which runs\n\n```\ngo %s\ngo %s\n```\n\n", strings.Join(scenarioArgs, " "), strings.Join(microArgs, " "))

	// Figures are listed by scenario, then by row, a row's figures in the
	// order its scenario gave them (a throughput row's CPU per message
	// before its msg/s), then by name.
	slices.SortStableFunc(figures, bench.Compare)
	fmt.Fprintf(w, "## Scenarios\n\n")
	fmt.Fprintf(w, "A figure measured in rounds (a run of the bridge and one of the baseline each, alternating which goes first) shows its spread: the least and the greatest over its rounds of the quantity its target is on (each round's bridge ÷ baseline, or the bridge's own value where the target names the bridge), and how many rounds. Its target is unclear when the spread reaches across it: some rounds meet it, some do not.\n\n")
	fmt.Fprintf(w, "| Scenario | Measured | Bridge | Baseline | Bridge ÷ baseline (or −) | Spread (rounds) | Target | Met |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---|---|\n")
	for _, f := range figures {
		compared := fmt.Sprintf("%.3f×", f.Ratio())
		if f.Difference {
			compared = fmt.Sprintf("%+.1f %s", f.Bridge-f.Baseline, f.Unit)
		}
		fmt.Fprintf(w, "| %s | %s | %s %s | %s %s (%s) | %s | %s | %s | %s |\n",
			f.Scenario, f.Name, num(f.Bridge), f.Unit, num(f.Baseline), f.Unit, f.BaselineName, compared, spread(f), f.Target, met(f))
	}
	var notes []string
	for _, f := range figures {
		if f.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s, %s: %s", f.Scenario, f.Name, f.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	}
	if len(micro) > 0 {
		fmt.Fprintf(w, "\n## Micro-benchmarks\n\nThe hot path, with allocations (`-benchmem`).\n\n```\n")
		for line := range strings.Lines(string(micro)) {
			if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") {
				fmt.Fprint(w, line)
			}
		}
		fmt.Fprintf(w, "```\n")
	}
}

// met is the Met column: yes, no or unclear; empty without a target.
func met(f bench.Figure) string {
	switch f.Outcome() {
	case bench.VerdictMet:
		return "yes"
	case bench.VerdictNotMet:
		return "no"
	case bench.VerdictUnclear:
		return "unclear"
	}
	return ""
}

// spread is the Spread column, e.g. "0.912–1.071 (5)"; empty for a figure
// measured once.
func spread(f bench.Figure) string {
	if f.Rounds == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%d)", f.SpreadRange(), f.Rounds)
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "model unknown"
	}
	return s
}
