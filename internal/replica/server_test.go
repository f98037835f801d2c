package replica

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	consumernats "github.com/kubebus/bridge/consumer/nats"
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

// allowAll authorizes every authenticated request but bob's.
var allowAll = authorizer.AuthorizerFunc(func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser() != nil && a.GetUser().GetName() == "bob" {
		return authorizer.DecisionNoOpinion, "not bob", nil
	}
	return authorizer.DecisionAllow, "", nil
})

// testServer runs a replica of srv's stream KUBE in process.
func testServer(t *testing.T, srv *natstest.Server, docs ...wire.Discovery) *httptest.Server {
	t.Helper()
	js := srv.JetStream(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "KUBE", Subjects: []string{"kube.>"}, MaxMsgsPerSubject: 1}); err != nil {
		t.Fatal(err)
	}
	tokens := tokenfile.New(map[string]*user.DefaultInfo{testToken: {Name: "alice"}, "bob-token": {Name: "bob"}})
	s, err := New(Config{
		Discovery: testDiscovery(docs),
		NewListerWatcher: func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			return consumernats.NewListerWatcher(js, consumernats.Config{}, consumer.Options{Cluster: cluster, Resource: gr})
		},
		Authenticator: bearertoken.New(tokens),
		Authorizer:    allowAll,
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	hs := httptest.NewTLSServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs
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

// Issue 27, point 2: bad input gets a clear 4xx naming what is wrong,
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
		{"unknown path", "GET", "/clusters/one/healthz", testToken, 404, "no path"},
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(t, hs, c.method, c.path, c.token)
			var st struct{ Message string }
			if err := json.Unmarshal([]byte(body), &st); err == nil && st.Message != "" {
				body = st.Message
			}
			if code != c.code || !strings.Contains(body, c.says) {
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
