package main

import (
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

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
