// Package corpus is a corpus of Kubernetes objects for tests against a
// real API server: realistic manifests of every built-in kind the test
// control plane serves (Builtin), two CRDs (CRDs) and objects of them
// with unicode, escapes, large and small numbers, empty maps and lists
// (Custom). A Client creates them with their bytes as written, not a
// client library's re-encoding of them.
package corpus

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"embed"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kubebus/bridge/source"
)

// The corpus's files.
const (
	// Builtin holds an object of every built-in kind, in namespace
	// "equiv" (which it creates) or cluster-scoped, named equiv-*.
	Builtin = "builtin.json"
	// CRDs defines widgets and gadgets of CustomGroup.
	CRDs = "crds.json"
	// Custom holds objects of the CRDs.
	Custom = "custom.json"
)

// CustomGroup is the group of the corpus's custom resources.
const CustomGroup = "equiv.example.com"

//go:embed testdata/*.json
var files embed.FS

// Client reads and writes the API server's JSON as bytes: what it sends
// is what the corpus holds.
type Client struct {
	http  *http.Client
	host  string
	Disco *discovery.DiscoveryClient
}

// NewClient returns a Client of the API server cfg points at.
func NewClient(t testing.TB, cfg *rest.Config) *Client {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Client{http: hc, host: strings.TrimSuffix(cfg.Host, "/"), Disco: dc}
}

// Do sends a request with a JSON body (or none) and returns the body of
// the answer, which must have one of the status codes ok.
func (c *Client) Do(method, path string, body []byte, ok ...int) ([]byte, int, error) {
	req, err := http.NewRequest(method, c.host+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if !slices.Contains(ok, resp.StatusCode) {
		return b, resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b, resp.StatusCode, nil
}

// Path is the API path of resource r, in namespace ns when r is
// namespaced and ns is set, and of the object name when it is set.
func Path(r source.Resource, ns, name string) string {
	p := "/apis/" + r.Group + "/" + r.Version
	if r.Group == "" {
		p = "/api/" + r.Version
	}
	if r.Namespaced && ns != "" {
		p += "/namespaces/" + ns
	}
	p += "/" + r.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}

// Manifests reads a file of the corpus, a JSON array of objects, each
// kept as its bytes, with the placeholders of certificates filled in.
func Manifests(t testing.TB, file string) []json.RawMessage {
	t.Helper()
	b, err := files.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	b = certificates(t).Replace(b)
	var out []json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return out
}

// placeholders replaces the placeholders of testdata with certificates
// the API server checks: CSR_PEM_B64 (a certificate signing request, PEM
// in base64), CSR_DER_B64 (the same, DER in base64) and CA_PEM (a
// self-signed CA certificate, PEM in a JSON string).
type placeholders map[string][]byte

func (p placeholders) Replace(b []byte) []byte {
	for k, v := range p {
		b = bytes.ReplaceAll(b, []byte(k), v)
	}
	return b
}

func certificates(t testing.TB) placeholders {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "jane@example.com", Organization: []string{"payments"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Equiv Root CA <test> & co"},
		NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Equiv Root CA <test> & co"}}, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := json.Marshal(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca})))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	return placeholders{
		"CSR_PEM_B64": []byte(b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}))),
		"CSR_DER_B64": []byte(b64(csr)),
		`"CA_PEM"`:    caPEM,
	}
}

// CreateAll creates the objects of a file of the corpus, in order,
// sending their bytes as they are. An object that exists already is left
// as it is when existing is true, and fails t otherwise.
func (c *Client) CreateAll(t testing.TB, file string, existing bool) {
	t.Helper()
	groups, err := restmapper.GetAPIGroupResources(c.Disco)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	ok := []int{http.StatusCreated, http.StatusOK, http.StatusAccepted}
	if existing {
		ok = append(ok, http.StatusConflict)
	}
	for _, m := range Manifests(t, file) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(m, &head); err != nil {
			t.Fatal(err)
		}
		gv, err := schema.ParseGroupVersion(head.APIVersion)
		if err != nil {
			t.Fatal(err)
		}
		mapping, err := mapper.RESTMapping(gv.WithKind(head.Kind).GroupKind(), gv.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", head.APIVersion, head.Kind, err)
		}
		r := source.Resource{GroupVersionResource: mapping.Resource, Kind: head.Kind, Namespaced: mapping.Scope.Name() == "namespace"}
		// A resource just defined may take a moment to accept objects.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, code, err := c.Do(http.MethodPost, Path(r, head.Metadata.Namespace, ""), m, ok...)
			if err == nil {
				break
			}
			if code != http.StatusNotFound || time.Now().After(deadline) {
				t.Fatalf("create %s: %v", head.Kind, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// WaitServed waits until the API server serves every resource of
// resources in group version gv.
func (c *Client) WaitServed(t testing.TB, gv string, resources ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.Disco.ServerResourcesForGroupVersion(gv)
		served := 0
		if err == nil {
			for _, r := range list.APIResources {
				if slices.Contains(resources, r.Name) {
					served++
				}
			}
		}
		if served == len(resources) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v not served after 30s: %v", gv, resources, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CreateEverything creates the whole corpus: the built-in objects, the
// CRDs (waiting until they are served) and their objects.
func (c *Client) CreateEverything(t testing.TB, existing bool) {
	t.Helper()
	c.CreateAll(t, Builtin, existing)
	c.CreateAll(t, CRDs, existing)
	c.WaitServed(t, CustomGroup+"/v1", "widgets", "gadgets")
	c.CreateAll(t, Custom, existing)
}
