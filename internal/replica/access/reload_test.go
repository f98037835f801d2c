package access

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/poll"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// syncBuffer is a log that the test reads while Run writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run runs f until the test ends, and checks it returned nil.
func run(t *testing.T, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// swap replaces the file at link as the kubelet updates a mounted Secret:
// a new directory, then a symlink renamed over the old one.
func swap(t *testing.T, dir, name, data string) {
	t.Helper()
	gen, err := os.MkdirTemp(dir, "..gen")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(gen, name), data)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func TestRulesFileReload(t *testing.T) {
	dir := t.TempDir()
	swap(t, dir, "rules.yaml", e2eRules)
	path := filepath.Join(dir, "rules.yaml")
	if err := os.Symlink("..data/rules.yaml", path); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	var mu sync.Mutex
	var reloads []error
	f, err := NewRulesFile(RulesFileConfig{
		Path: path, Interval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		OnReload: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reloads = append(reloads, err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, f.Run)

	ctx := WithCluster(context.Background(), "prod")
	pods := res(usr("alice"), "list", "", "pods", "team-a", "")
	cms := res(usr("alice"), "list", "", "configmaps", "team-a", "")
	allowed := func(a authorizer.Attributes) bool {
		d, _, _ := f.Authorize(ctx, a)
		return d == authorizer.DecisionAllow
	}
	if !allowed(pods) || allowed(cms) {
		t.Fatal("the first rules are not in use")
	}

	// A new file: configmaps instead of pods.
	swap(t, dir, "rules.yaml", strings.Replace(e2eRules, "[pods]", "[configmaps]", 1))
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return allowed(cms) && !allowed(pods), "configmaps not allowed yet, or pods still"
	})
	if st := f.Status(); st.Err != nil || st.Failed != 0 {
		t.Errorf("status after a good reload: %+v", st)
	}

	// A bad file: the last good rules stay, the error names the file and the field.
	swap(t, dir, "rules.yaml", strings.Replace(e2eRules, "[get, list, watch]", "[get, list, delete]", 1))
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return f.Status().Err != nil, "no error in the status"
	})
	st := f.Status()
	if want := path + ": grants[0].rules[0].verbs[2]"; !strings.Contains(st.Err.Error(), want) || st.Failed != 1 {
		t.Errorf("status %+v, want an error saying %q and Failed 1", st, want)
	}
	if !allowed(cms) || allowed(pods) {
		t.Error("a bad file changed the rules in use")
	}
	// Run logs after it sets the status: wait for the line.
	poll.Until(t, 5*time.Second, func() (bool, string) {
		l := log.String()
		return strings.Contains(l, "keeping the last good rules") && strings.Contains(l, "file="+path), "the log does not tell of the bad file: " + l
	})

	// A file that vanishes is an error too; the rules stay.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		err := f.Status().Err
		return err != nil && strings.Contains(err.Error(), "no such file"), "status does not say the file is missing"
	})
	if !allowed(cms) {
		t.Error("a missing file changed the rules in use")
	}

	// Good again.
	if err := os.Symlink("..data/rules.yaml", path); err != nil {
		t.Fatal(err)
	}
	swap(t, dir, "rules.yaml", e2eRules)
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return allowed(pods) && f.Status().Err == nil, "the good file is not in use"
	})
	// Run calls OnReload after it puts the rules in use: wait for the call.
	poll.Until(t, 5*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(reloads) >= 4, fmt.Sprintf("OnReload saw %v", reloads)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(reloads) != 4 || reloads[0] != nil || reloads[1] == nil || reloads[2] == nil || reloads[3] != nil {
		t.Errorf("OnReload saw %v, want nil, an error, an error, nil", reloads)
	}
}

// replace writes data to path in one step, by a rename, so that a reader
// never sees it half written.
func replace(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRulesFileStatusAfterUnreadable holds that a file back after being
// unreadable is reported as what it is: good again, or still bad.
func TestRulesFileStatusAfterUnreadable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	good := e2eRules
	bad := strings.Replace(e2eRules, "[get, list, watch]", "[get, list, delete]", 1)
	writeFile(t, path, good)
	f, err := NewRulesFile(RulesFileConfig{Path: path, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, f.Run)
	unreadable := func() (bool, string) {
		err := f.Status().Err
		return err != nil && strings.Contains(err.Error(), "no such file"), fmt.Sprintf("status does not say the file is missing: %v", err)
	}
	readable := func() (bool, string) {
		err := f.Status().Err
		return err == nil || !strings.Contains(err.Error(), "no such file"), "status still says the file is missing"
	}
	ctx := WithCluster(context.Background(), "prod")
	goodInUse := func() bool {
		d, _, _ := f.Authorize(ctx, res(usr("alice"), "list", "", "pods", "team-a", ""))
		return d == authorizer.DecisionAllow
	}

	// Good, unreadable, the same good content again: no error.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, unreadable)
	replace(t, path, good)
	poll.Until(t, 5*time.Second, readable)
	if st := f.Status(); st.Err != nil {
		t.Errorf("the good file back: status %+v, want no error", st)
	}

	// Bad, unreadable, the same bad content again: its error again.
	replace(t, path, bad)
	poll.Until(t, 5*time.Second, func() (bool, string) { return f.Status().Err != nil, "no error for the bad file" })
	badErr := f.Status().Err.Error()
	if want := path + ": grants[0].rules[0].verbs[2]"; !strings.Contains(badErr, want) {
		t.Fatalf("the bad file: error %q does not say %q", badErr, want)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, unreadable)
	failed := f.Status().Failed
	replace(t, path, bad)
	poll.Until(t, 5*time.Second, readable)
	st := f.Status()
	if st.Err == nil || st.Err.Error() != badErr || st.Failed != failed {
		t.Errorf("the bad file back: status %+v, want the error %q and Failed %d", st, badErr, failed)
	}
	if !goodInUse() {
		t.Error("the good rules are not in use")
	}
}

func TestNewRulesFileFails(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, header+"grants: []\n")
	for _, c := range []struct{ path, want string }{
		{"", "no path"},
		{filepath.Join(dir, "missing.yaml"), "missing.yaml"},
		{bad, bad + ": grants: is empty"},
	} {
		if _, err := NewRulesFile(RulesFileConfig{Path: c.path}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRulesFile(%q): error %v, want one saying %q", c.path, err, c.want)
		}
	}
}

// TestAuthenticatorReload changes the client CA and the tokens under a
// running Authenticator.
func TestAuthenticatorReload(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := newTestCA(t, "old"), newTestCA(t, "new")
	caFile, tokenFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tokens.csv")
	writeFile(t, caFile, string(oldCA.pem))
	writeFile(t, tokenFile, "tok-one,one,1\n")
	var log syncBuffer
	a, err := NewAuthenticator(AuthnConfig{ClientCAFile: caFile, TokenFile: tokenFile,
		Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a.Run)

	oldCert, newCert := oldCA.client(t, "alice"), newCA.client(t, "alice")
	who := func(cert *tls.Certificate, token string) string {
		r, _ := http.NewRequest("GET", "https://replica/", nil)
		if cert != nil {
			leaf, _ := parseLeaf(cert)
			r.TLS = &tls.ConnectionState{PeerCertificates: leaf}
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, ok, _ := a.AuthenticateRequest(r)
		if !ok {
			return ""
		}
		return resp.User.GetName() + " " + strings.Join(resp.User.GetGroups(), ",")
	}
	if got := who(&oldCert, ""); got != "alice system:authenticated" {
		t.Fatalf("old CA's cert: %q", got)
	}
	if who(&newCert, "") != "" || who(nil, "tok-two") != "" {
		t.Fatal("new credentials accepted before the files changed")
	}

	writeFile(t, caFile, string(newCA.pem))
	writeFile(t, tokenFile, "tok-two,two,2,\"a,b\"\n")
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return who(&newCert, "") != "" && who(nil, "tok-two") != "", "the new CA or token is not in use"
	})
	if who(&oldCert, "") != "" || who(nil, "tok-one") != "" {
		t.Error("old credentials still accepted")
	}
	if got := who(nil, "tok-two"); got != "two a,b,system:authenticated" {
		t.Errorf("token's identity %q", got)
	}

	// Bad files: the last good ones stay, and the log names them, never a token.
	writeFile(t, caFile, "not a certificate")
	writeFile(t, tokenFile, "tok-three,,3\n")
	poll.Until(t, 5*time.Second, func() (bool, string) {
		l := log.String()
		return strings.Contains(l, caFile) && strings.Contains(l, tokenFile+": line 1: the user name is empty"), l
	})
	if who(&newCert, "") == "" || who(nil, "tok-two") == "" {
		t.Error("bad files changed the credentials in use")
	}
	if l := log.String(); strings.Contains(l, "tok-") {
		t.Errorf("the log holds a token: %s", l)
	}
}
