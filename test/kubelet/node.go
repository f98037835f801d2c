package kubelet

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeName is the node the pods run on, as spec.nodeName says.
const nodeName = "kubelet-test-node"

// serviceAccountDir is where the ServiceAccount admission plugin mounts
// the pod's token, CA and namespace, and where client-go's in-cluster
// configuration reads them.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// rootCAConfigMap is the ConfigMap that kube-controller-manager publishes
// in every namespace with the API server's CA; the kube-api-access volume
// the ServiceAccount admission plugin adds reads ca.crt from it.
const rootCAConfigMap = "kube-root-ca.crt"

// Node runs pods of one API server on this machine, with the bridge's
// image. Its pods share the host's network: the API server's address is
// what KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT say, and two
// pods cannot listen on one port.
type Node struct {
	cs      kubernetes.Interface
	apiHost string
	apiPort int
	ca      []byte
	image   *Image
	// claims holds the PersistentVolumeClaims' directories.
	claims string
}

// NewNode is a node of the API server that admin (a client configuration
// with the right to create pods, tokens and ConfigMaps, and a CA for the
// API server's certificate) reaches, running containers of image. The API
// server must run the ServiceAccount admission plugin, which gives a pod
// its token volume.
func NewNode(t testing.TB, admin *rest.Config, image *Image) *Node {
	t.Helper()
	u, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatalf("kubelet: the API server's address %q: %v", admin.Host, err)
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("kubelet: the API server's address %q: %v", admin.Host, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatalf("kubelet: the API server's port %q: %v", portText, err)
	}
	if len(admin.CAData) == 0 {
		t.Fatal("kubelet: the admin configuration has no CAData for the API server")
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	return &Node{cs: cs, apiHost: host, apiPort: port, ca: admin.CAData, image: image, claims: t.TempDir()}
}

// PodOf is a pod of Deployment d's template, named as its ReplicaSet
// would name it, with suffix.
func PodOf(d *appsv1.Deployment, suffix string) *corev1.Pod {
	tmpl := d.Spec.Template.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        d.Name + "-" + suffix,
			Namespace:   d.Namespace,
			Labels:      tmpl.Labels,
			Annotations: tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
}

// publishRootCA creates the namespace's kube-root-ca.crt ConfigMap, as
// kube-controller-manager does in every namespace.
func (n *Node) publishRootCA(ctx context.Context, namespace string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: rootCAConfigMap, Namespace: namespace},
		Data:       map[string]string{"ca.crt": string(n.ca)},
	}
	_, err := n.cs.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("ConfigMap %s/%s: %w", namespace, rootCAConfigMap, err)
	}
	return nil
}
