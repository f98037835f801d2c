package access

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

var serial big.Int

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, cert, der := issue(t, nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	})
	return &testCA{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client issues a client certificate for user cn in groups orgs.
func (ca *testCA) client(t *testing.T, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	key, _, der := issue(t, ca.key, ca.cert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

var serialMu sync.Mutex

func issue(t *testing.T, parentKey *ecdsa.PrivateKey, parent, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serialMu.Lock()
	serial.Add(&serial, big.NewInt(1))
	tmpl.SerialNumber = new(big.Int).Set(&serial)
	serialMu.Unlock()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withClusterPrefix is the server's routing, in small: it takes
// /clusters/<name> off the path and puts the cluster in the context.
func withClusterPrefix(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
		if ok {
			cluster, p, _ := strings.Cut(rest, "/")
			r = r.WithContext(WithCluster(r.Context(), cluster))
			r.URL.Path = "/" + p
		}
		next.ServeHTTP(w, r)
	})
}

// chain is the replica's filter chain around a handler that says who
// asked for what.
func chain(authn *Authenticator, authz *RulesFile) http.Handler {
	codecs := scheme.Codecs.WithoutConversion()
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := request.UserFrom(r.Context())
		fmt.Fprintf(w, "%s %s", u.GetName(), r.URL.Path)
	}))
	h = filters.WithAuthorization(h, authz, codecs)
	h = filters.WithAuthentication(h, authn, filters.Unauthorized(codecs), nil, nil)
	h = filters.WithRequestInfo(h, &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	})
	return withClusterPrefix(h)
}

const e2eRules = header + `grants:
- subjects: [{kind: User, name: alice}, {kind: Group, name: sre}]
  clusters: [prod]
  rules:
  - apiGroups: [""]
    resources: [pods]
    namespaces: [team-a]
    verbs: [get, list, watch]
- subjects: [{kind: User, name: erin}]
  clusters: [prod]
  rules:
  - apiGroups: ["*"]
    resources: ["*"]
    namespaces: [team-a]
    verbs: ["*"]
  - apiGroups: [""]
    resources: [configmaps]
    namespaces: [team-b]
    resourceNames: [settings]
    verbs: [list, watch]
`

func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "replica clients"), newTestCA(t, "someone else")
	caFile, tokenFile, rulesFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "rules.yaml")
	writeFile(t, caFile, string(ca.pem))
	writeFile(t, tokenFile, "s3cret-carol,carol,1001,\"sre,dev\"\ns3cret-dave,dave,1002\n")
	writeFile(t, rulesFile, e2eRules)

	authn, err := NewAuthenticator(AuthnConfig{ClientCAFile: caFile, TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	var denyMu sync.Mutex
	var denials []string
	authz, err := NewRulesFile(RulesFileConfig{Path: rulesFile, OnDeny: func(cluster, resource string) {
		denyMu.Lock()
		defer denyMu.Unlock()
		denials = append(denials, cluster+"/"+resource)
	}})
	if err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewUnstartedServer(chain(authn, authz))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	client := func(cert *tls.Certificate) *http.Client {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		}
		return &http.Client{Transport: tr}
	}
	alice, bob, aliceElsewhere := ca.client(t, "alice"), ca.client(t, "bob", "sre"), other.client(t, "alice")
	noCN := ca.client(t, "", "sre")
	erin := ca.client(t, "erin")

	cases := []struct {
		name   string
		cert   *tls.Certificate
		token  string
		path   string
		method string
		code   int
		body   string // in the answer
	}{
		{"cert: list granted", &alice, "", "/clusters/prod/api/v1/namespaces/team-a/pods", "", 200, "alice /api/v1/namespaces/team-a/pods"},
		{"cert: watch granted", &alice, "", "/clusters/prod/api/v1/namespaces/team-a/pods?watch=true", "", 200, "alice"},
		{"cert: discovery with a grant", &alice, "", "/clusters/prod/apis", "", 200, "alice /apis"},
		{"cert: discovery of /api/v1", &alice, "", "/clusters/prod/api/v1", "", 200, "alice /api/v1"},
		{"cert: discovery of a group version", &alice, "", "/clusters/prod/apis/apps/v1", "", 200, "alice /apis/apps/v1"},
		{"cert: all clusters", &alice, "", "/clusters/*/api/v1/namespaces/team-a/pods", "", 200, "alice"},
		{"cert: other namespace", &alice, "", "/clusters/prod/api/v1/namespaces/team-b/pods", "", 403, `user \"alice\"`},
		{"cert: secrets", &alice, "", "/clusters/prod/api/v1/namespaces/team-a/secrets", "", 403, "secrets"},
		{"cert: no grant on the cluster, list", &alice, "", "/clusters/dev/api/v1/namespaces/team-a/pods", "", 403, `cluster \"dev\"`},
		{"cert: no grant on the cluster, watch", &alice, "", "/clusters/dev/api/v1/namespaces/team-a/pods?watch=1", "", 403, "watch"},
		{"cert: no grant on the cluster, discovery", &alice, "", "/clusters/dev/api", "", 403, "/api"},
		{"cert: write", &alice, "", "/clusters/prod/api/v1/namespaces/team-a/pods", "POST", 403, "create"},
		{"cert: no cluster", &alice, "", "/version", "", 403, "names no cluster"},
		{"cert: group from O", &bob, "", "/clusters/prod/api/v1/namespaces/team-a/pods/p1", "", 200, "bob /api/v1/namespaces/team-a/pods/p1"},
		{"cert: no CommonName", &noCN, "", "/clusters/prod/apis", "", 401, "Unauthorized"},
		{"cert of another CA", &aliceElsewhere, "", "/clusters/prod/apis", "", 401, "Unauthorized"},
		{"token: group from the file", nil, "s3cret-carol", "/clusters/prod/api/v1/namespaces/team-a/pods", "", 200, "carol"},
		{"token: no grant", nil, "s3cret-dave", "/clusters/prod/api/v1/namespaces/team-a/pods", "", 403, `user \"dave\"`},
		{"bad token", nil, "s3cret-nobody", "/clusters/prod/apis", "", 401, "Unauthorized"},
		{"bad token with a good cert", &alice, "s3cret-nobody", "/clusters/prod/apis", "", 200, "alice"},
		{"no credentials", nil, "", "/clusters/prod/apis", "", 401, "Unauthorized"},
		{"no credentials, all clusters", nil, "", "/clusters/*/api/v1/pods", "", 401, "Unauthorized"},

		// A namespace-limited rule, with RequestInfo's reading of the paths.
		{"namespace-limited: in its namespace", &erin, "", "/clusters/prod/api/v1/namespaces/team-a/configmaps/c", "", 200, "erin"},
		{"namespace-limited: its Namespace", &erin, "", "/clusters/prod/api/v1/namespaces/team-a", "", 403, `get namespaces \"team-a\"`},
		{"namespace-limited: its Namespace's status", &erin, "", "/clusters/prod/api/v1/namespaces/team-a/status", "", 403, "namespaces/status"},
		{"namespace-limited: watch its Namespace", &erin, "", "/clusters/prod/api/v1/watch/namespaces/team-a", "", 403, "watch namespaces"},
		{"namespace-limited: SECRETS", &erin, "", "/clusters/prod/api/v1/namespaces/team-a/SECRETS/s", "", 403, "SECRETS"},
		{"namespace-limited: its Namespace by field selector", &erin, "", "/clusters/prod/api/v1/namespaces?fieldSelector=metadata.name%3Dteam-a", "", 403, "list namespaces"},

		// resourceNames: a list or watch only with the metadata.name field
		// selector of a name listed, which the server then applies.
		{"resourceNames: list without the selector", &erin, "", "/clusters/prod/api/v1/namespaces/team-b/configmaps", "", 403, "list configmaps"},
		{"resourceNames: list by label", &erin, "", "/clusters/prod/api/v1/namespaces/team-b/configmaps?labelSelector=app%3Dsettings", "", 403, "list configmaps"},
		{"resourceNames: list with the selector", &erin, "", "/clusters/prod/api/v1/namespaces/team-b/configmaps?fieldSelector=metadata.name%3Dsettings", "", 200, "erin"},
		{"resourceNames: watch with the selector", &erin, "", "/clusters/prod/api/v1/namespaces/team-b/configmaps?watch=1&fieldSelector=metadata.name%3Dsettings", "", 200, "erin"},
		{"resourceNames: list of another name", &erin, "", "/clusters/prod/api/v1/namespaces/team-b/configmaps?fieldSelector=metadata.name%3Dother", "", 403, `list configmaps \"other\"`},
		{"resourceNames: list of all but the name", &erin, "", "/clusters/prod/api/v1/namespaces/team-b/configmaps?fieldSelector=metadata.name!%3Dsettings", "", 403, "list configmaps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := client(c.cert).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code || !strings.Contains(string(body), c.body) {
				t.Fatalf("%d %s, want %d and %q", resp.StatusCode, body, c.code, c.body)
			}
			if c.token != "" && strings.Contains(string(body), c.token) {
				t.Errorf("the answer holds the token: %s", body)
			}
		})
	}

	denyMu.Lock()
	defer denyMu.Unlock()
	want := []string{"prod/pods", "prod/secrets", "dev/pods", "dev/pods", "dev/", "prod/pods", "/", "prod/pods",
		"prod/namespaces", "prod/namespaces", "prod/namespaces", "prod/SECRETS", "prod/namespaces",
		"prod/configmaps", "prod/configmaps", "prod/configmaps", "prod/configmaps"}
	if strings.Join(denials, " ") != strings.Join(want, " ") {
		t.Errorf("OnDeny saw %q, want %q", denials, want)
	}
}

func parseLeaf(c *tls.Certificate) ([]*x509.Certificate, error) {
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	return []*x509.Certificate{leaf}, err
}
