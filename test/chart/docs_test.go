package chart

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// TestREADME: the chart's README documents every value of values.yaml,
// no value that does not exist, and every variable of the bridge (set by a
// value, or named as one to set with extraEnv).
func TestREADME(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	data, err = os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}

	leaves := map[string]bool{}
	valueLeaves("", values, schema, leaves)
	// The values table: the rows that start with a `value`, under "## Values".
	_, table, ok := strings.Cut(string(readme), "\n## Values\n")
	if !ok {
		t.Fatal(`README.md has no "## Values" section`)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-zA-Z0-9.]+)` \\|").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	for _, v := range slices.Sorted(maps.Keys(leaves)) {
		if !documented[v] {
			t.Errorf("README.md: no row for value %s", v)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(documented)) {
		if !leaves[v] {
			t.Errorf("README.md documents value %s, which values.yaml does not have", v)
		}
	}

	for v := range bridgeVariables(t) {
		if !strings.Contains(string(readme), "`"+v+"`") {
			t.Errorf("README.md does not say how to set %s", v)
		}
	}
}

// valueLeaves adds the paths of the values to document: it descends into
// objects whose schema lists their properties, and stops at anything else
// (a Kubernetes object passed through, a list, a scalar).
func valueLeaves(prefix string, values map[string]any, schema map[string]any, out map[string]bool) {
	props, _ := schema["properties"].(map[string]any)
	for k, v := range values {
		path := strings.TrimPrefix(prefix+"."+k, ".")
		sub, _ := props[k].(map[string]any)
		m, isMap := v.(map[string]any)
		if _, ok := sub["properties"]; isMap && ok {
			valueLeaves(path, m, sub, out)
			continue
		}
		out[path] = true
	}
}
