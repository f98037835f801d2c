package chart

import (
	"slices"
	"strings"
	"testing"
)

// TestLint runs helm lint --strict on the chart with its defaults and with
// each CI value set: no errors, and no warnings (which --strict turns into
// failures).
func TestLint(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{"defaults": nil}
	for _, s := range append(slices.Clone(valueSets), watchAll) {
		cases[s.name] = []string{"-f", s.file()}
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runHelm(t, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint did not pass:\n%s", out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "[WARNING]") || strings.HasPrefix(line, "[ERROR]") {
					t.Errorf("helm lint: %s", line)
				}
			}
		})
	}
}
