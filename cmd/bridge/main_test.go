package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/source"
)

// Every client the bridge makes from its rest.Config shares one rate
// limiter, so that BRIDGE_KUBE_QPS and BRIDGE_KUBE_BURST bound all of the
// bridge's requests together, not each client's.
func TestClientsShareOneRateLimiter(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:6443"}
	limitRate(rc, 7, 11)
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	src := rest.CopyConfig(rc)
	src.Wrap(source.WrapTransport)
	sc, err := source.NewRESTClient(src)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	limiters := map[string]flowcontrol.RateLimiter{
		"discovery":       dc.RESTClient().GetRateLimiter(),
		"source":          sc.GetRateLimiter(),
		"leader election": kc.CoordinationV1().RESTClient().GetRateLimiter(),
	}
	for name, l := range limiters {
		if l == nil || l != rc.RateLimiter {
			t.Errorf("the %s client has its own rate limiter (%p); want the shared one (%p)", name, l, rc.RateLimiter)
		}
	}
	if q := rc.RateLimiter.QPS(); q != 7 {
		t.Errorf("shared limiter's QPS %v; want 7", q)
	}
}

// KUBECONFIG is read from the environment run is given, like every other
// variable, not from the process's.
func TestKubeconfigFromTheGivenEnvironment(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		path := filepath.Join(dir, name)
		kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\n" +
			"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
		if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	given := write("given", "https://given.example:6443")
	t.Setenv("KUBECONFIG", write("process", "https://process.example:6443"))
	cfg, err := config.Load([]string{"BRIDGE_RESOURCES=configmaps", "KUBECONFIG=" + given})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://given.example:6443" {
		t.Errorf("client configured for %s; want the server of the KUBECONFIG given to run", rc.Host)
	}
}

func TestVersion(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"--version"}, nil, &out); code != 0 {
		t.Fatalf("bridge --version exited %d: %s", code, out.String())
	}
	if !strings.HasPrefix(out.String(), "bridge ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("bridge --version printed %q, want the version, revision and Go version", out.String())
	}
}
