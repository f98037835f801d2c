package controlplane

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigName is used for the cluster, the user and the context.
const kubeconfigName = "controlplane"

// writeKubeconfig writes <dir>/kubeconfig for the admin user, with the CA
// embedded so that the file stands alone.
func writeKubeconfig(dir, server string, caPEM []byte, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[kubeconfigName] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[kubeconfigName] = &clientcmdapi.Context{
		Cluster:   kubeconfigName,
		AuthInfo:  kubeconfigName,
		Namespace: "default",
	}
	cfg.CurrentContext = kubeconfigName

	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("controlplane: writing kubeconfig: %w", err)
	}
	return path, nil
}
