package leader

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/controlplane"
)

// The package's tests share one control plane, started by the first test
// that needs it; each test works in a namespace of its own.
var (
	cpOnce sync.Once
	cp     *controlplane.ControlPlane
	cpErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cp != nil {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "leader: stop control plane:", err)
		}
	}
	os.Exit(code)
}

// apiServer is a client configuration for the shared control plane, and a
// namespace made for t.
func apiServer(t *testing.T) (*rest.Config, string) {
	t.Helper()
	cpOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cp, cpErr = controlplane.Start(ctx, controlplane.Options{})
	})
	if cpErr != nil {
		t.Fatalf("start control plane (run `make controlplane` first): %v", cpErr)
	}
	kc := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "leader-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return cp.RESTConfig(), ns.Name
}
