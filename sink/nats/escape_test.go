package nats

import (
	"errors"
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
		back, err := UnescapeToken(tok)
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
