package access

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenFileErrors(t *testing.T) {
	cases := []struct{ name, data, want string }{
		{"too few columns", "tok-a,alice\n", "tokens.csv: line 1: has 2 columns, want at least 3"},
		{"empty token", "tok-a,alice,1\n,bob,2\n", "tokens.csv: line 2: the token is empty"},
		{"empty user", "tok-a,,1\n", "tokens.csv: line 1: the user name is empty"},
		{"token twice", "tok-a,alice,1\ntok-b,bob,2\ntok-a,carol,3\n", "tokens.csv: line 3: has the token of line 1 again"},
		{"bad quoting", "tok-a,alice,1,\"sre\n", "tokens.csv: parse error on line 1"},
		{"empty", "", "tokens.csv: holds no token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTokens([]byte(c.data), "tokens.csv")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), "tok-") {
				t.Errorf("the error holds a token: %v", err)
			}
		})
	}
}

func TestNewAuthenticatorFails(t *testing.T) {
	dir := t.TempDir()
	notPEM, badTokens := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tokens.csv")
	writeFile(t, notPEM, "not a certificate")
	writeFile(t, badTokens, "tok-a,alice\n")
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name string
		cfg  AuthnConfig
		want string
	}{
		{"nothing", AuthnConfig{}, "at least one is required"},
		{"CA missing", AuthnConfig{ClientCAFile: missing}, missing},
		{"CA not PEM", AuthnConfig{ClientCAFile: notPEM}, "client CA file " + notPEM},
		{"tokens missing", AuthnConfig{TokenFile: missing}, missing},
		{"tokens bad", AuthnConfig{TokenFile: badTokens}, badTokens + ": line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewAuthenticator(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
