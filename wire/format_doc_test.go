package wire

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Every example in docs/message-format.md is an event this package reads
// and writes back unchanged.
func TestDocumentedExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/message-format.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(doc), "```json\n")[1:]
	if len(parts) < 4 {
		t.Fatalf("%d examples, want one of each type (4)", len(parts))
	}
	actions := map[string]bool{}
	for i, p := range parts {
		block, _, _ := strings.Cut(p, "```")
		var m Message
		if err := json.Unmarshal([]byte(block), &m); err != nil {
			t.Errorf("example %d: %v", i, err)
			continue
		}
		actions[m.Action] = true
		out, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := json.Unmarshal([]byte(block), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("example %d (%s) does not survive a round trip:\n got %v\nwant %v", i, m.ID, got, want)
		}
	}
	for _, a := range []string{"added", "updated", "deleted"} {
		if !actions[a] {
			t.Errorf("no %s example", a)
		}
	}
}

// The attribute table of docs/message-format.md lists the attributes of
// the package's table, in its order.
func TestDocumentedAttributes(t *testing.T) {
	doc, err := os.ReadFile("../docs/message-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "| attribute | example | meaning |\n|---|---|---|\n")
	if !ok {
		t.Fatal("docs/message-format.md has no attribute table")
	}
	var documented []string
	for line := range strings.Lines(rest) {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		documented = append(documented, name)
	}
	var table []string
	for _, a := range Attributes() {
		table = append(table, a.Name())
	}
	if !reflect.DeepEqual(documented, table) {
		t.Errorf("docs/message-format.md documents %v, the table holds %v", documented, table)
	}
}
