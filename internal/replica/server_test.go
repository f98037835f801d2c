package replica

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
