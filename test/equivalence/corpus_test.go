package equivalence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kubebus/bridge/source"
)

// client reads and writes the API server's JSON as bytes: what it sends
// is what the corpus holds, not a client library's re-encoding of it.
type client struct {
	http  *http.Client
	host  string
	disco *discovery.DiscoveryClient
}

func newClient(t *testing.T, cfg *rest.Config) *client {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &client{http: hc, host: strings.TrimSuffix(cfg.Host, "/"), disco: dc}
}

// do sends a request with a JSON body (or none) and returns the body of
// the answer, which must have one of the status codes ok.
func (c *client) do(method, path string, body []byte, ok ...int) ([]byte, int, error) {
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

// path is the API path of resource r, in namespace ns when r is
// namespaced and ns is set, and of the object name when it is set.
func path(r source.Resource, ns, name string) string {
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

// manifests reads a JSON array of objects, each kept as its bytes, with
// the placeholders of certificates filled in.
func manifests(t *testing.T, file string) []json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(file)
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

func certificates(t *testing.T) placeholders {
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

// createAll creates the objects of file, in order, sending their bytes as
// they are.
func (c *client) createAll(t *testing.T, file string) {
	t.Helper()
	groups, err := restmapper.GetAPIGroupResources(c.disco)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, m := range manifests(t, file) {
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
			_, code, err := c.do(http.MethodPost, path(r, head.Metadata.Namespace, ""), m, http.StatusCreated, http.StatusOK, http.StatusAccepted)
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

// waitServed waits until the API server serves every resource of
// resources in group version gv.
func (c *client) waitServed(t *testing.T, gv string, resources ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.disco.ServerResourcesForGroupVersion(gv)
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

// watchable is every resource the API server serves that the bridge can
// watch (list and watch), at its preferred version.
func (c *client) watchable(t *testing.T) []source.Resource {
	t.Helper()
	lists, err := c.disco.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	var out []source.Resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			out = append(out, source.Resource{GroupVersionResource: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced})
		}
	}
	return out
}

// object is one object of the corpus, as the API server sent it and as
// today's source decodes it.
type object struct {
	resource source.Resource
	key      string
	// get is the object as a GET (or a watch event) sends it, and
	// getParsed what the dynamic client's decoder makes of it.
	get       []byte
	getParsed *unstructured.Unstructured
	// item is the object as an item of a list of its resource, which
	// lacks apiVersion and kind for built-in kinds, and itemParsed what
	// the dynamic client's decoder makes of it (it adds them).
	item       []byte
	itemParsed *unstructured.Unstructured
}

// read lists every object of the resources, and gets each.
func (c *client) read(t *testing.T, resources []source.Resource) []object {
	t.Helper()
	var out []object
	for _, r := range resources {
		body, _, err := c.do(http.MethodGet, path(r, "", ""), nil, http.StatusOK)
		if err != nil {
			t.Fatal(err)
		}
		var raw struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatalf("list %s: %v", r.Name(), err)
		}
		decoded, err := runtime.Decode(unstructured.UnstructuredJSONScheme, body)
		if err != nil {
			t.Fatalf("list %s: %v", r.Name(), err)
		}
		list, ok := decoded.(*unstructured.UnstructuredList)
		if !ok || len(list.Items) != len(raw.Items) {
			t.Fatalf("list %s: decoded into %T", r.Name(), decoded)
		}
		for i, item := range list.Items {
			get, _, err := c.do(http.MethodGet, path(r, item.GetNamespace(), item.GetName()), nil, http.StatusOK)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, get)
			if err != nil {
				t.Fatalf("get %s %s: %v", r.Name(), item.GetName(), err)
			}
			out = append(out, object{
				resource: r, key: source.ObjectKey(item.GetNamespace(), item.GetName()),
				get: get, getParsed: obj.(*unstructured.Unstructured),
				item: raw.Items[i], itemParsed: &list.Items[i],
			})
		}
	}
	return out
}
