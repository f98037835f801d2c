package controlplane

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestControlPlane(t *testing.T) {
	c := ForTest(t)
	ctx := t.Context()

	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	configMaps := cs.CoreV1().ConfigMaps("default")
	created, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "controlplane-test"},
		Data:       map[string]string{"key": "value"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap: %v", err)
	}
	got, err := configMaps.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap back: %v", err)
	}
	if got.UID != created.UID || got.Data["key"] != "value" {
		t.Fatalf("read back %s %v, want %s map[key:value]", got.UID, got.Data, created.UID)
	}

	// Restart the API server only: the object must survive in etcd, and the
	// old process must be gone.
	etcdBefore, apiBefore := c.pids()
	began := time.Now()
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("RestartAPIServer took %s", time.Since(began).Round(time.Millisecond))
	assertGone(t, "old kube-apiserver", apiBefore)
	etcdAfter, apiAfter := c.pids()
	if etcdAfter != etcdBefore {
		t.Errorf("etcd pid changed from %d to %d; RestartAPIServer must keep etcd", etcdBefore, etcdAfter)
	}
	if apiAfter == apiBefore {
		t.Errorf("kube-apiserver pid %d unchanged after RestartAPIServer", apiAfter)
	}
	got, err = configMaps.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap after RestartAPIServer: %v", err)
	}
	if got.UID != created.UID || got.Data["key"] != "value" {
		t.Fatalf("after restart read %s %v, want %s map[key:value]", got.UID, got.Data, created.UID)
	}

	// The kubeconfig file works on its own.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		t.Fatalf("loading kubeconfig: %v", err)
	}
	fromFile, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := fromFile.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing namespaces with the kubeconfig: %v", err)
	}
	var names []string
	for _, ns := range namespaces.Items {
		names = append(names, ns.Name)
	}
	for _, want := range []string{"default", "kube-system"} {
		if !slices.Contains(names, want) {
			t.Errorf("namespaces %v lack %q", names, want)
		}
	}

	if err := etcdHealthy(ctx, c.EtcdURL()); err != nil {
		t.Errorf("EtcdURL %s: %v", c.EtcdURL(), err)
	}

	// Stop reaps both processes and removes the temporary directory.
	etcdPID, apiPID := c.pids()
	dir := c.Dir()
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, "etcd", etcdPID)
	assertGone(t, "kube-apiserver", apiPID)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("working directory %s still there after Stop (stat: %v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := c.RestartAPIServer(ctx); err == nil {
		t.Error("RestartAPIServer after Stop succeeded")
	}
}

func TestStartMissingBinary(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(t.Context(), Options{BinDir: dir, Dir: t.TempDir()})
	if err == nil {
		t.Fatal("Start with an empty BinDir succeeded")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "controlplane: ") || !strings.Contains(msg, "make controlplane") || !strings.Contains(msg, dir) {
		t.Errorf("error %q should start with \"controlplane: \", name %s and say to run `make controlplane`", msg, dir)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not wrap fs.ErrNotExist", err)
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !declaresModule(root+"/go.mod", modulePath) {
		t.Errorf("moduleRoot() = %s, whose go.mod is not module %s", root, modulePath)
	}
}

// pids returns the current processes' ids.
func (c *ControlPlane) pids() (etcd, apiServer int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.etcd.pid, c.apiServer.pid
}

// assertGone fails t unless no process has the given pid. Stop and
// RestartAPIServer reap what they stop, so there is nothing to wait for.
func assertGone(t *testing.T, what string, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("%s (pid %d) still exists: kill(pid, 0) = %v", what, pid, err)
	}
}
