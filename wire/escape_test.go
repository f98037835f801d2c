package wire

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestEscapeToken(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"web", "web"},
		{"team-a", "team-a"},
		{"ip-10-0-1-5.ec2.internal", "ip-10-0-1-5_ec2_internal"},
		{"apps", "apps"},
		{"example.com", "example_com"},
		{"a_b", "a%5Fb"},
		{"100%", "100%25"},
		{"a*b>c", "a%2Ab%3Ec"},
		{"with space", "with%20space"},
		{"tab\tnewline\n", "tab%09newline%0A"},
		{"é", "%C3%A9"},
		{"del\x7f", "del%7F"},
		{"$JS", "$JS"},
		{"Upper.Case", "Upper_Case"},
		{"..", "__"},
		{"", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := EscapeToken(tc.in)
			if got != tc.want {
				t.Fatalf("EscapeToken(%q) = %q, want %q", tc.in, got, tc.want)
			}
			back, err := UnescapeToken(got)
			if err != nil || back != tc.in {
				t.Fatalf("UnescapeToken(%q) = %q, %v; want %q", got, back, err, tc.in)
			}
		})
	}
}

func TestUnescapeTokenRejects(t *testing.T) {
	for _, tok := range []string{
		"a.b",      // a raw dot
		"a*",       // a wildcard
		"a>",       // a wildcard
		"a b",      // whitespace
		"é",        // raw non-ASCII
		"%",        // cut short
		"%4",       // cut short
		"%zz",      // not hexadecimal
		"%5f",      // lower case
		"%41",      // "A" is written as itself
		"%2E",      // "." is written as "_"
		"ok%2",     // cut short at the end
		"\x00",     // control character
		"a%5Fb%2G", // one bad escape after a good one
	} {
		t.Run(tok, func(t *testing.T) {
			got, err := UnescapeToken(tok)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("UnescapeToken(%q) = %q, %v; want an error wrapping ErrInvalidToken", tok, got, err)
			}
		})
	}
}

// Every valid Kubernetes name and namespace maps to a valid subject token
// and back; any string at all maps back to itself; and a token that
// unescapes is the only token for its string.
func FuzzTokenRoundTrip(f *testing.F) {
	for _, s := range []string{
		"web", "kube-system", "ip-10-0-1-5.ec2.internal", "a", "0", "x.y.z",
		"widgets.example.com", "a_b", "%41", "*", ">", " ", "é", "", "_",
		"system:node:worker-1", "..", "\x00\xff",
		strings.Repeat("a", MaxTokenLen), strings.Repeat("a", MaxTokenLen+1), strings.Repeat("é_", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EscapeToken(s)
		k8sName := len(validation.IsDNS1123Subdomain(s)) == 0 || len(validation.IsDNS1123Label(s)) == 0
		if k8sName && !validToken(tok) {
			t.Fatalf("Kubernetes name %q escapes to %q, not a valid subject token", s, tok)
		}
		if s != "" && !validToken(tok) {
			t.Fatalf("%q escapes to %q, not a valid subject token", s, tok)
		}
		if len(tok) > MaxTokenLen {
			t.Fatalf("%q escapes to %d bytes, above MaxTokenLen", s, len(tok))
		}
		back, err := UnescapeToken(tok)
		if len(escapeToken(s)) > MaxTokenLen {
			if !errors.Is(err, ErrHashedToken) {
				t.Fatalf("UnescapeToken of the bounded token %q: %q, %v; want ErrHashedToken", tok, back, err)
			}
			return
		}
		if strings.Contains(tok, hashMarker) {
			t.Fatalf("the token %q of a short value holds the marker %q", tok, hashMarker)
		}
		if err != nil {
			t.Fatalf("UnescapeToken(EscapeToken(%q) = %q): %v", s, tok, err)
		}
		if back != s {
			t.Fatalf("round trip of %q: %q -> %q", s, tok, back)
		}
		// Read as a token, s either is rejected or is the one token of
		// what it unescapes to.
		if u, err := UnescapeToken(s); err == nil && EscapeToken(u) != s {
			t.Fatalf("UnescapeToken(%q) = %q, which escapes to %q", s, u, EscapeToken(u))
		}
	})
}

// A value whose escaped form passes MaxTokenLen gets a bounded token:
// never longer than MaxTokenLen, the same every time, never the token of
// a short value, and different for values that differ only past the cut.
func TestEscapeTokenBounded(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	keep := MaxTokenLen - len(hashMarker) - 32 // bytes of the escaped value kept
	for _, tc := range []struct {
		name, in string
		hashed   bool
		kept     string // start of a bounded token
	}{
		{name: "just under the bound", in: a(MaxTokenLen - 1)},
		{name: "at the bound", in: a(MaxTokenLen)},
		{name: "escaped form at the bound", in: a(MaxTokenLen-3) + "_"},
		{name: "just past the bound", in: a(MaxTokenLen + 1), hashed: true, kept: a(keep)},
		{name: "escaped form just past the bound", in: a(MaxTokenLen-2) + "_", hashed: true, kept: a(keep)},
		{name: "dots become underscores before the cut", in: strings.Repeat("a.", 200), hashed: true, kept: strings.Repeat("a_", keep/2)},
		{name: "cut before an escape it would split, 1", in: a(keep-1) + strings.Repeat("_", 40), hashed: true, kept: a(keep - 1)},
		{name: "cut before an escape it would split, 2", in: a(keep-2) + strings.Repeat("_", 40), hashed: true, kept: a(keep - 2)},
		{name: "an escape ending at the cut is kept", in: a(keep-3) + strings.Repeat("_", 40), hashed: true, kept: a(keep-3) + "%5F"},
		{name: "longest name the API server takes", in: a(524216), hashed: true, kept: a(keep)},
		{name: "non-ASCII", in: strings.Repeat("é", 200), hashed: true, kept: strings.Repeat("%C3%A9", keep/6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := EscapeToken(tc.in)
			if len(tok) > MaxTokenLen || !validToken(tok) {
				t.Fatalf("EscapeToken of %d bytes = %d bytes %q: not a token within MaxTokenLen (%d)", len(tc.in), len(tok), tok, MaxTokenLen)
			}
			if again := EscapeToken(tc.in); again != tok {
				t.Fatalf("EscapeToken is not deterministic: %q, then %q", tok, again)
			}
			back, err := UnescapeToken(tok)
			if !tc.hashed {
				if err != nil || back != tc.in {
					t.Fatalf("UnescapeToken(%q) = %q, %v; want the value back", tok, back, err)
				}
				return
			}
			if !errors.Is(err, ErrHashedToken) {
				t.Fatalf("UnescapeToken of a bounded token = %q, %v; want an error wrapping ErrHashedToken", back, err)
			}
			if kept, _, ok := strings.Cut(tok, hashMarker); !ok || kept != tc.kept {
				t.Errorf("bounded token %q keeps %q before %q, want %q", tok, kept, hashMarker, tc.kept)
			}
			// Changing the value past the cut changes the token.
			if other := EscapeToken(tc.in + "b"); other == tok {
				t.Errorf("%q + \"b\" has the same token %q", tc.in[:40], tok)
			}
			// A short value spelled like the bounded token has a token of
			// its own.
			if short := EscapeToken(tok); short == tok {
				t.Errorf("the short value %q has the bounded token as its own", tok)
			}
		})
	}
}

// A bounded token with a broken start or hash is not one.
func TestUnescapeTokenRejectsBadBounded(t *testing.T) {
	tok := EscapeToken(strings.Repeat("x", 1000))
	for name, bad := range map[string]string{
		"raw dot in the start":    "a.b" + tok[3:],
		"upper-case hash":         tok[:len(tok)-1] + "A",
		"short hash":              tok[:len(tok)-1],
		"marker without a hash":   "abc" + hashMarker,
		"longer than the bound":   "x" + tok,
		"bad escape in the start": "%5" + tok[2:],
	} {
		t.Run(name, func(t *testing.T) {
			got, err := UnescapeToken(bad)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("UnescapeToken(%q) = %q, %v; want an error wrapping ErrInvalidToken", bad, got, err)
			}
		})
	}
}
