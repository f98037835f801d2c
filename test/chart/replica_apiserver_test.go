package chart

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// checkReplica has the API server judge the replica's objects: every one
// accepted by a server-side dry run without a warning, helm install
// --dry-run=server with its NOTES, then helm install for real, after which
// the replica's ServiceAccount may read nothing, and helm uninstall.
func checkReplica(t *testing.T, c *cluster, kubeconfig string) {
	s := replicaSet
	c.createNamespaces(t, s.namespace)
	t.Run("dry-run", func(t *testing.T) { dryRun(t, c, s) })
	t.Run("helm-install-dry-run", func(t *testing.T) {
		notes := helmInstall(t, kubeconfig, s)
		for _, want := range []string{
			"https://" + replicaName + "." + s.namespace + ".svc:6443/clusters/<cluster>",
			"kubectl -n " + s.namespace + " rollout status deployment/" + replicaName,
			"get secret " + replicaName + "-tls",
			"every helm upgrade makes\na new one",
		} {
			if !strings.Contains(notes, want) {
				t.Errorf("NOTES lack %q:\n%s", want, notes)
			}
		}
	})
	t.Run("no permissions", func(t *testing.T) {
		if _, err := runHelm(t, "install", s.release, chartDir, "-n", s.namespace, "-f", s.file(), "--kubeconfig", kubeconfig); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := runHelm(t, "uninstall", s.release, "-n", s.namespace, "--kubeconfig", kubeconfig); err != nil {
				t.Error(err)
			}
		}()
		cs, err := kubernetes.NewForConfig(c.tokenConfig(t, s.namespace, replicaName))
		if err != nil {
			t.Fatal(err)
		}
		// The bridge beside it may list configmaps everywhere.
		for _, ns := range []string{s.namespace, ""} {
			_, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("the replica's ServiceAccount lists configmaps in %q: %v, want forbidden", ns, err)
			}
		}
		if _, err := cs.CoreV1().Secrets(s.namespace).Get(t.Context(), replicaName+"-tls", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the replica's ServiceAccount reads its own certificate's Secret: %v, want forbidden", err)
		}
		bridge, err := kubernetes.NewForConfig(c.tokenConfig(t, s.namespace, s.fullname))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bridge.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Errorf("the bridge's ServiceAccount, beside it, cannot list configmaps: %v (the check above proves nothing)", err)
		}
	})
}
