package chart

import (
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// checkWithToken repeats the essentials of checkRBAC as the bridge will do
// them: with a token of the ServiceAccount, it lists and watches what it is
// granted, is forbidden the rest, and runs its leader election's calls.
// It also shows that the groups checkRBAC gives the ServiceAccount are the
// ones its token carries.
func checkWithToken(t *testing.T, c *cluster, s valueSet, g grants) {
	t.Helper()
	ctx := t.Context()
	cfg := c.tokenConfig(t, s.namespace, s.fullname)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// resource returns the client for gr in ns, or false for a resource
	// the server does not serve (a CRD that is not installed).
	resource := func(gr schema.GroupResource, ns string) (dynamic.ResourceInterface, bool) {
		gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			return nil, false
		}
		if ns == "" {
			return dyn.Resource(gvr), true
		}
		return dyn.Resource(gvr).Namespace(ns), true
	}
	listAndWatch := func(gr schema.GroupResource, ns string, allowed bool) {
		t.Helper()
		ri, ok := resource(gr, ns)
		if !ok {
			return
		}
		where := gr.String() + " in namespace " + ns
		if ns == "" {
			where = gr.String() + " in all namespaces"
		}
		_, err := ri.List(ctx, metav1.ListOptions{Limit: 1})
		expectVerdict(t, "list "+where, err, allowed)
		w, err := ri.Watch(ctx, metav1.ListOptions{})
		if err == nil {
			w.Stop()
		}
		expectVerdict(t, "watch "+where, err, allowed)
	}

	readable := g.namespaces
	if len(readable) == 0 {
		readable = []string{"", elsewhere}
	}
	for gr := range g.namespaced {
		for _, ns := range readable {
			listAndWatch(gr, ns, true)
		}
		if len(g.namespaces) > 0 {
			listAndWatch(gr, "", false)
			listAndWatch(gr, elsewhere, false)
		}
	}
	for gr := range g.cluster {
		listAndWatch(gr, "", true)
	}
	secrets := schema.GroupResource{Resource: "secrets"}
	if !g.namespaced[secrets] {
		listAndWatch(secrets, s.namespace, false)
	}

	// Leader election: create the Lease, read it, renew it.
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: s.fullname, Namespace: s.namespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: new(podName), LeaseDurationSeconds: new(int32(15))},
	}
	created, err := cs.CoordinationV1().Leases(s.namespace).Create(ctx, lease, metav1.CreateOptions{})
	expectVerdict(t, "create Lease "+s.fullname, err, g.lease != "")
	if g.lease == "" {
		return
	}
	if err != nil {
		return
	}
	got, err := cs.CoordinationV1().Leases(s.namespace).Get(ctx, s.fullname, metav1.GetOptions{})
	expectVerdict(t, "get Lease "+s.fullname, err, true)
	if err == nil {
		got.Spec.RenewTime = &metav1.MicroTime{Time: created.CreationTimestamp.Time}
		_, err = cs.CoordinationV1().Leases(s.namespace).Update(ctx, got, metav1.UpdateOptions{})
		expectVerdict(t, "update Lease "+s.fullname, err, true)
	}
	err = cs.CoordinationV1().Leases(s.namespace).Delete(ctx, s.fullname, metav1.DeleteOptions{})
	expectVerdict(t, "delete Lease "+s.fullname, err, false)

	other := lease.DeepCopy()
	other.Name = "another-lease"
	if _, err := c.cs.CoordinationV1().Leases(s.namespace).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoordinationV1().Leases(s.namespace).Get(ctx, other.Name, metav1.GetOptions{})
	expectVerdict(t, "get Lease "+other.Name, err, false)
	_, err = cs.CoordinationV1().Leases(s.namespace).List(ctx, metav1.ListOptions{})
	expectVerdict(t, "list Leases", err, g.allows(access{verb: "list", gr: leases, namespace: s.namespace}))
	lease.Namespace = elsewhere
	_, err = cs.CoordinationV1().Leases(elsewhere).Create(ctx, lease, metav1.CreateOptions{})
	expectVerdict(t, "create Lease in namespace "+elsewhere, err, false)
}

// tokenConfig is a client configuration that authenticates with a token
// of the ServiceAccount namespace/name, asked for with a TokenRequest, as
// the kubelet asks for the pod's.
func (c *cluster) tokenConfig(t *testing.T, namespace, name string) *rest.Config {
	t.Helper()
	tr, err := c.cs.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.cfg)
	cfg.BearerToken = tr.Status.Token
	return cfg
}
