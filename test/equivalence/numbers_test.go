package equivalence

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kubebus/bridge/internal/event"
	testcorpus "github.com/kubebus/bridge/test/corpus"
)

// number is how one number of the Widget "tricky" (test/corpus/testdata/custom.json,
// spec.numbers) travels: as the test sent it, as the API server sends it
// back, and as the parsed path publishes it. The raw path publishes the API
// server's spelling, byte for byte (checkNumbers), and that is the right
// one: it is what the API server sent, what any client reading the object
// sees.
//
// The two paths agree on every number: the API server decodes a custom
// object the way the parsed path does (an integer into int64 when it fits,
// any other number into float64) before it stores it, and sends it back
// encoded as encoding/json encodes those. So a large integer past 2^63,
// -0.0 or a float with more digits than float64 holds arrives already as
// the parsed path would have made it, and the raw path carries it alike.
// Integers past 2^53 up to 2^63 stay exact on both paths (int64, not
// float64). Built-in objects hold no floats (quantities are strings).
type number struct {
	field, sent, server, parsed string
}

var numbers = []number{
	{"maxSafePlus1", "9007199254740993", "9007199254740993", "9007199254740993"},
	{"maxInt64", "9223372036854775807", "9223372036854775807", "9223372036854775807"},
	{"minInt64", "-9223372036854775808", "-9223372036854775808", "-9223372036854775808"},
	{"overInt64", "18446744073709551615", "18446744073709552000", "18446744073709552000"},
	{"hugeInt", "100000000000000000000000", "1e+23", "1e+23"},
	{"tiny", "1e-7", "1e-7", "1e-7"},
	{"huge", "1.5e300", "1.5e+300", "1.5e+300"},
	{"upper", "1E+2", "100", "100"},
	{"fraction", "0.1", "0.1", "0.1"},
	{"negZero", "-0.0", "0", "0"},
	{"negZeroInt", "-0", "0", "0"},
	{"one", "1.0", "1", "1"},
	{"exp21", "1e21", "1e+21", "1e+21"},
	{"denormal", "5e-324", "5e-324", "5e-324"},
	{"precise", "123456789.125", "123456789.125", "123456789.125"},
	{"manyDigits", "3.141592653589793238462643383279", "3.141592653589793", "3.141592653589793"},
}

// checkNumbers holds the numbers of the Widget "tricky" to the table
// above: the raw event carries the API server's spelling of each.
func checkNumbers(t *testing.T, corpus []object) {
	var tricky *object
	for i := range corpus {
		if corpus[i].resource.Resource == "widgets" && corpus[i].key == "equiv/tricky" {
			tricky = &corpus[i]
		}
	}
	if tricky == nil {
		t.Fatal("the Widget equiv/tricky is not in the corpus")
	}
	var sent map[string]json.Number
	for _, m := range testcorpus.Manifests(t, testcorpus.Custom) {
		var w struct {
			Metadata struct{ Name string }
			Spec     struct{ Numbers json.RawMessage }
		}
		if err := json.Unmarshal(m, &w); err != nil {
			t.Fatal(err)
		}
		if w.Metadata.Name == "tricky" {
			sent = numbersOf(t, w.Spec.Numbers)
		}
	}
	var server struct {
		Spec struct{ Numbers json.RawMessage }
	}
	if err := json.Unmarshal(tricky.get, &server); err != nil {
		t.Fatal(err)
	}
	enc := event.Encoder{Cluster: "prod"}
	observed := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	raw, err := rawDelta(tricky.resource, tricky.get, observed)
	if err != nil {
		t.Fatal(err)
	}
	parsed := parsedDelta(tricky.resource, tricky.getParsed, false, observed)
	rm, err := enc.Encode(&raw)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := enc.Encode(&parsed)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]json.Number{
		"sent":   sent,
		"server": numbersOf(t, server.Spec.Numbers),
		"raw":    eventNumbers(t, rm.Data),
		"parsed": eventNumbers(t, pm.Data),
	}
	if len(got["sent"]) != len(numbers) {
		t.Fatalf("testdata sends %d numbers, the table has %d", len(got["sent"]), len(numbers))
	}
	t.Logf("%-14s %-34s %-22s %-22s %s", "field", "sent", "API server", "raw event", "parsed event")
	for _, n := range numbers {
		s, srv, r, p := got["sent"][n.field], got["server"][n.field], got["raw"][n.field], got["parsed"][n.field]
		t.Logf("%-14s %-34s %-22s %-22s %s", n.field, s, srv, r, p)
		if r != srv {
			t.Errorf("%s: the raw event carries %s, the API server sent %s", n.field, r, srv)
		}
		if string(s) != n.sent || string(srv) != n.server || string(p) != n.parsed {
			t.Errorf("%s: sent %s, API server %s, parsed event %s; the table says %s, %s, %s",
				n.field, s, srv, p, n.sent, n.server, n.parsed)
		}
	}
}

func numbersOf(t *testing.T, b json.RawMessage) map[string]json.Number {
	t.Helper()
	var out map[string]json.Number
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("numbers: %v: %s", err, b)
	}
	return out
}

func eventNumbers(t *testing.T, data []byte) map[string]json.Number {
	t.Helper()
	var d struct {
		Object struct {
			Spec struct{ Numbers json.RawMessage }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return numbersOf(t, d.Object.Spec.Numbers)
}
