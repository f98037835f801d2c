package bounded

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Abbrev leaves a short value alone and bounds a long one, cut at a
// character boundary, with its length and a hash that tells apart values
// differing only past the cut.
func TestAbbrev(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		whole    bool
	}{
		{name: "short", in: "web", whole: true},
		{name: "at the bound", in: strings.Repeat("a", AbbrevLen), whole: true},
		{name: "just past the bound", in: strings.Repeat("a", AbbrevLen+1)},
		{name: "longest name", in: strings.Repeat("a", 524_216)},
		{name: "multi-byte characters at the cut", in: strings.Repeat("é", AbbrevLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Abbrev(tc.in)
			if tc.whole {
				if got != tc.in {
					t.Fatalf("Abbrev(%q) = %q, want it unchanged", tc.in, got)
				}
				return
			}
			if len(got) > 2*AbbrevLen || !utf8.ValidString(got) || !strings.HasPrefix(tc.in, got[:strings.Index(got, "…")]) {
				t.Fatalf("Abbrev of %d bytes = %q: not a valid start of it within %d bytes", len(tc.in), got, 2*AbbrevLen)
			}
			if Abbrev(tc.in) != got || Abbrev(tc.in+"b") == got {
				t.Errorf("Abbrev of %d bytes = %q: not deterministic, or the same for a longer value", len(tc.in), got)
			}
		})
	}
}
