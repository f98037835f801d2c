package source

import (
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/controlplane"
)

// cluster is the shared control plane, as its admin sees it.
type cluster struct {
	rc *rest.Config // wrapped with WrapTransport
	kc kubernetes.Interface
}

func sharedCluster(t *testing.T) cluster {
	t.Helper()
	rc := controlplane.Shared(t).RESTConfig()
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	rc.WrapTransport = WrapTransport
	return cluster{rc: rc, kc: kc}
}

// namespace makes a namespace for t.
func (c cluster) namespace(t *testing.T) string {
	t.Helper()
	ns, err := c.kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "source-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// as is the configuration of user, who may do verbs on configmaps in ns.
func (c cluster) as(t *testing.T, user, ns string, verbs ...string) *rest.Config {
	t.Helper()
	if len(verbs) > 0 {
		rbac := c.kc.RbacV1()
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}}}
		if _, err := rbac.Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		if _, err := rbac.RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rc := rest.CopyConfig(c.rc)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	return rc
}

// configMap makes a ConfigMap in ns with labels.
func (c cluster) configMap(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.kc.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sourceOn is a Source of opts on path, with the client of rc.
func sourceOn(t *testing.T, rc *rest.Config, path Path, opts Options, log *slog.Logger) *Source {
	t.Helper()
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if path == PathRaw {
		if opts.REST, err = NewRESTClient(rc); err != nil {
			t.Fatal(err)
		}
	}
	return New(client, opts, emptyLoader{}, HandlerFunc(func(Delta) {}), log)
}
