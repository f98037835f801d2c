package replica

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	consumernats "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/internal/replica/access"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// testDiscovery is a DiscoveryLog of fixed documents, then nothing.
type testDiscovery []wire.Discovery

func (d testDiscovery) Follow(ctx context.Context, fn func(wire.Discovery) error) error {
	for _, doc := range d {
		if err := fn(doc); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

const testToken = "test-token"

// testTokens are the identities of the in-process tests: alice may read
// every cluster, reader may get, list and watch configmaps of cluster
// one, named may read the configmap "a" of cluster one alone, watcher may
// only watch configmaps of cluster one, bob has no grant.
const testTokens = testToken + `,alice,uid-alice
bob-token,bob,uid-bob
reader-token,reader,uid-reader
named-token,named,uid-named
watcher-token,watcher,uid-watcher
`

const testRules = `apiVersion: replica.kubebus.io/v1
kind: AccessRules
grants:
- subjects: [{kind: User, name: alice}]
  clusters: ["*"]
  rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
- subjects: [{kind: User, name: reader}]
  clusters: [one]
  rules:
  - {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
- subjects: [{kind: User, name: named}]
  clusters: [one]
  rules:
  - {apiGroups: [""], resources: [configmaps], resourceNames: [a], verbs: [get, list, watch]}
- subjects: [{kind: User, name: watcher}]
  clusters: [one]
  rules:
  - {apiGroups: [""], resources: [configmaps], verbs: [watch]}
`

// testServer runs a replica of srv's stream KUBE in process, with the
// access package's authenticator and rules read from files.
func testServer(t *testing.T, srv *natstest.Server, docs ...wire.Discovery) *httptest.Server {
	t.Helper()
	hs, _, _ := testServerWith(t, srv, docs...)
	return hs
}

func testServerWith(t *testing.T, srv *natstest.Server, docs ...wire.Discovery) (*httptest.Server, *Server, *natssink.Sink) {
	t.Helper()
	return testServerConfig(t, srv, func(*Config) {}, docs...)
}

// testServerConfig is testServerWith, with the Config changed by mod.
func testServerConfig(t *testing.T, srv *natstest.Server, mod func(*Config), docs ...wire.Discovery) (*httptest.Server, *Server, *natssink.Sink) {
	t.Helper()
	js := srv.JetStream(t)
	// The bridge's own sink makes the stream, as the bridge would.
	vars := srv.Env()
	vars["BRIDGE_NATS_LAYOUT"] = string(natssink.LayoutState)
	bus := bustest.NATSSink(t, vars)
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "tokens.csv"), testTokens)
	writeTestFile(t, filepath.Join(dir, "rules.yaml"), testRules)
	authn, err := access.NewAuthenticator(access.AuthnConfig{TokenFile: filepath.Join(dir, "tokens.csv")})
	if err != nil {
		t.Fatal(err)
	}
	var s *Server
	rules, err := access.NewRulesFile(access.RulesFileConfig{Path: filepath.Join(dir, "rules.yaml"), OnDeny: func(c, r string) { s.Denied(c, r) }})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Discovery: testDiscovery(docs),
		NewListerWatcher: func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			return consumernats.NewListerWatcher(js, consumernats.Config{}, consumer.Options{Cluster: cluster, Resource: gr})
		},
		Authenticator: authn,
		Rules:         rules,
		Registerer:    prometheus.NewRegistry(),
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	mod(&cfg)
	s, err = New(cfg)

	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	hs := httptest.NewTLSServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs, s, bus
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, hs *httptest.Server, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := hs.Client()
	c.Timeout = 10 * time.Second
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func cmDiscovery(cluster string) wire.Discovery {
	return wire.Discovery{Cluster: cluster, Server: "https://api.example:6443", Resources: []wire.DiscoveredResource{{
		Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Singular: "configmap", Namespaced: true, ShortNames: []string{"cm"},
	}}}
}

func TestServeEmpty(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	hs := testServer(t, srv, cmDiscovery("one"))
	_ = nats.Header{}
	code, body := get(t, hs, "/clusters/one/api/v1/namespaces/x/configmaps", testToken)
	t.Logf("%d %s", code, body)
	if code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
}

// Bad input gets a clear 4xx naming what is wrong,
// never a crash; nothing is served before authentication and
// authorization; writes are 405.
func TestBadInput(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	hs := testServer(t, srv, cmDiscovery("one"))
	long := strings.Repeat("a", 300)
	cases := []struct {
		name, method, path, token string
		code                      int
		says                      string
	}{
		{"no credentials", "GET", "/clusters/one/api/v1/configmaps", "", 401, "Unauthorized"},
		{"no credentials, discovery", "GET", "/clusters/one/api", "", 401, "Unauthorized"},
		{"no rule", "GET", "/clusters/one/api/v1/configmaps", "bob-token", 403, "forbidden"},
		{"outside /clusters", "GET", "/api/v1/configmaps", testToken, 404, "/clusters/<name>/"},
		{"bad cluster name", "GET", "/clusters/Bad_Name/api/v1/configmaps", testToken, 400, "Bad_Name"},
		{"over-long cluster name", "GET", "/clusters/" + long + "/api", testToken, 400, "not valid"},
		{"unknown cluster", "GET", "/clusters/two/api/v1/configmaps", testToken, 404, `cluster "two" is not on the bus`},
		{"unknown resource", "GET", "/clusters/one/api/v1/widgets", testToken, 404, "no resource widgets"},
		{"unknown group", "GET", "/clusters/one/apis/example.com", testToken, 404, "example.com"},
		{"not discovery", "GET", "/clusters/one/healthz", testToken, 403, `cannot get path "/healthz"`},
		{"field selector", "GET", "/clusters/one/api/v1/configmaps?fieldSelector=data.x%3Dy", testToken, 400, `"data.x"`},
		{"label selector", "GET", "/clusters/one/api/v1/configmaps?labelSelector=%3D%3D%3D", testToken, 400, "expected"},
		{"continue token", "GET", "/clusters/one/api/v1/configmaps?continue=garbage", testToken, 400, "continue token"},
		{"over-long name", "GET", "/clusters/one/api/v1/namespaces/x/configmaps/" + long, testToken, 404, "not found"},
		{"unknown position", "GET", "/clusters/one/api/v1/configmaps?resourceVersion=n1.nope", testToken, 410, "not held"},
		{"watch from unknown position", "GET", "/clusters/one/api/v1/configmaps?watch=1&resourceVersion=n1.nope", testToken, 410, "not held"},
		{"subresource", "GET", "/clusters/one/api/v1/namespaces/x/configmaps/a/status", testToken, 404, "subresource"},
		{"delete", "DELETE", "/clusters/one/api/v1/namespaces/x/configmaps/a", testToken, 405, `read-only replica of cluster "one" fed by the bus; send writes to its API server, https://api.example:6443`},
		{"create", "POST", "/clusters/one/api/v1/namespaces/x/configmaps", testToken, 405, "read-only replica"},
		{"all-clusters write", "PUT", "/clusters/*/api/v1/namespaces/x/configmaps/a", testToken, 405, "all-clusters view"},
		// Writes are 405 before authorization, for whoever is
		// authenticated; the API server is named to those with a grant.
		{"delete, read-only rules", "DELETE", "/clusters/one/api/v1/namespaces/x/configmaps/a", "reader-token", 405, "send writes to its API server, https://api.example:6443"},
		{"create, read-only rules", "POST", "/clusters/one/api/v1/namespaces/x/configmaps", "reader-token", 405, "create is not allowed: this is a read-only replica"},
		{"patch, read-only rules", "PATCH", "/clusters/one/api/v1/namespaces/x/configmaps/a", "reader-token", 405, "patch is not allowed"},
		{"deletecollection, read-only rules", "DELETE", "/clusters/one/api/v1/namespaces/x/configmaps", "reader-token", 405, "deletecollection is not allowed"},
		{"post to discovery", "POST", "/clusters/one/api/v1", "reader-token", 405, "read-only replica"},
		{"delete, no grant", "DELETE", "/clusters/one/api/v1/namespaces/x/configmaps/a", "bob-token", 405, `cluster "one" fed by the bus; send writes to its API server` + endOfMessage},
		{"write, no credentials", "DELETE", "/clusters/one/api/v1/namespaces/x/configmaps/a", "", 401, "Unauthorized"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(t, hs, c.method, c.path, c.token)
			var st struct{ Message string }
			if err := json.Unmarshal([]byte(body), &st); err == nil && st.Message != "" {
				body = st.Message
			}
			if code != c.code || !strings.Contains(body+endOfMessage, c.says) {
				t.Errorf("%s %s: %d %s; want %d saying %q", c.method, truncate(c.path, 60), code, body, c.code, c.says)
			}
		})
	}
	// A huge limit is clamped, and served.
	if code, body := get(t, hs, "/clusters/one/api/v1/configmaps?limit=999999999999", testToken); code != 200 {
		t.Errorf("huge limit: %d %s", code, body)
	}
	// Discovery names the resource as kubectl needs it.
	code, body := get(t, hs, "/clusters/one/api/v1", testToken)
	for _, want := range []string{`"name":"configmaps"`, `"kind":"ConfigMap"`, `"namespaced":true`, `"verbs":["get","list","watch"]`, `"shortNames":["cm"]`, `"singularName":"configmap"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/api/v1: %d %s; want %s", code, body, want)
		}
	}
}

// endOfMessage marks, in TestBadInput, that a message ends where says
// does.
const endOfMessage = "\x00"

func do(t *testing.T, hs *httptest.Server, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, hs.URL+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := hs.Client()
	c.Timeout = 10 * time.Second
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
