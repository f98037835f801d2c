package envvar

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kubebus/bridge/test/tlstest"
)

// A Secret shows "[redacted]" wherever it is printed, logged or
// marshalled, alone or inside a struct, and nothing when empty.
func TestSecretNeverShown(t *testing.T) {
	const value = "hunter2-very-secret"
	s := Secret(value)
	holder := struct {
		Name     string
		Password Secret
	}{"bridge", s}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", s, "holder", holder)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", s, "holder", holder)
	js, err := json.Marshal(holder)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", s), "%s": fmt.Sprintf("(%s)", s), "%q": fmt.Sprintf("%q", s), "%#v": fmt.Sprintf("%#v", s),
		"%+v holder": fmt.Sprintf("%+v", holder), "%#v holder": fmt.Sprintf("%#v", holder),
		"slog": logged.String(), "json": string(js),
	} {
		if strings.Contains(out, value) || !strings.Contains(out, Redacted) {
			t.Errorf("%s shows %s", name, out)
		}
	}
	if got := Secret("").String(); got != "" {
		t.Errorf("an empty Secret shows %q", got)
	}
}

// Problems joins *Errors that name their variables, as errors.As finds
// them, and Split takes them apart again.
func TestProblems(t *testing.T) {
	var p Problems
	if p.Err() != nil {
		t.Fatal("no problems, yet an error")
	}
	p.Add("A", "must be %s", "positive")
	p.Join(errors.Join(&Error{Var: "B", Err: errors.New("b")}, &Error{Var: "C", Err: errors.New("c")}))
	p.Join(nil)
	err := p.Err()
	if err.Error() != "A: must be positive\nB: b\nC: c" {
		t.Errorf("message %q", err)
	}
	if names := vars(t, err); !slices.Equal(names, []string{"A", "B", "C"}) {
		t.Errorf("variables %v", names)
	}
}

// TLS files are read into a configuration, and each problem names the
// variable at fault, with the prefix.
func TestTLSFiles(t *testing.T) {
	pki := tlstest.NewPKI(t)
	notPEM := t.TempDir() + "/not.pem"
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  []string // variables at fault, in order
	}{
		{"everything", TLSFiles{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile}, nil},
		{"CA only", TLSFiles{CAFile: pki.CAFile}, nil},
		{"missing CA", TLSFiles{CAFile: "/nonexistent/ca.pem"}, []string{"X_TLS_CA_FILE"}},
		{"CA not PEM", TLSFiles{CAFile: notPEM}, []string{"X_TLS_CA_FILE"}},
		{"certificate without key", TLSFiles{CertFile: pki.CertFile}, []string{"X_TLS_KEY_FILE"}},
		{"key without certificate", TLSFiles{KeyFile: pki.KeyFile}, []string{"X_TLS_CERT_FILE"}},
		{"key of another certificate", TLSFiles{CertFile: pki.CAFile, KeyFile: pki.KeyFile}, []string{"X_TLS_CERT_FILE"}},
		{"nothing right", TLSFiles{CAFile: notPEM, CertFile: notPEM, KeyFile: notPEM}, []string{"X_TLS_CA_FILE", "X_TLS_CERT_FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc2, err := tc.files.Config("X_", "broker.example")
			if got := vars(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("variables at fault %v, want %v (%v)", vars(t, err), tc.want, err)
			}
			if err != nil {
				return
			}
			if tc2.ServerName != "broker.example" || tc2.RootCAs == nil || (tc.files.CertFile != "") != (len(tc2.Certificates) == 1) {
				t.Errorf("configuration %+v", tc2)
			}
		})
	}
}

// vars lists the variables the *Errors joined in err name, failing t on
// an error of another type.
func vars(t *testing.T, err error) []string {
	t.Helper()
	var names []string
	for _, e := range Split(err) {
		var ve *Error
		if !errors.As(e, &ve) {
			t.Fatalf("%v is not an *Error", e)
		}
		names = append(names, ve.Var)
	}
	return names
}
