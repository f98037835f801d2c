package leader

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/controlplane"
)

// The package's tests share one control plane (controlplane.Shared); each
// works in a namespace of its own.
func TestMain(m *testing.M) { os.Exit(controlplane.RunShared(m)) }

// apiServer is a client configuration for the shared control plane, and a
// namespace made for t.
func apiServer(t *testing.T) (*rest.Config, string) {
	t.Helper()
	cp := controlplane.Shared(t)
	kc := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "leader-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return cp.RESTConfig(), ns.Name
}
