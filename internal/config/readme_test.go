package config

import (
	"os"
	"strings"
	"testing"
)

// The README's table documents every variable with its real default.
func TestREADMEListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(readme)) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	for name, f := range variables() {
		def, hasDefault := defaultOf(name, f)
		got, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("README does not list %s", name)
		case hasDefault && got != def:
			t.Errorf("README gives %s the default %q, the code %q", name, got, def)
		}
	}
}
