package pod

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/kubelet"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// TestChartReplicaAPI runs the replica as the chart deploys it, from the
// bridge's image with /replica as its command, beside the release's
// bridge: the ci/replica set on this machine's NATS, with the tokens
// Secret it names. The replica's pod turns ready by its probe on /readyz
// and serves its Kubernetes API over TLS, with the certificate the chart
// generated: /clusters/<name>/api to a token, not without one, and
// /clusters/<name>/api/v1 with the resources the bridge published.
func TestChartReplicaAPI(t *testing.T) {
	t.Parallel()
	const namespace, cluster, token = "fleet", "eu-west-2", "replica-token-5d1e"
	srv := natstest.Start(t, natstest.Options{})
	createNamespace(t, namespace)
	// kube-apiserver's --token-auth-file form: token, user, uid, groups. The
	// set's rules grant the group sre configmaps in every cluster.
	createSecret(t, namespace, "replica-tokens", map[string][]byte{
		"tokens.csv": []byte(token + ",alice,u-alice,\"sre\"\n"),
	})
	apiPort, replicaMetrics := freePort(t), freePort(t)
	for replicaMetrics == apiPort {
		replicaMetrics = freePort(t)
	}
	bridgeMetrics := freePort(t)
	for bridgeMetrics == apiPort || bridgeMetrics == replicaMetrics {
		bridgeMetrics = freePort(t)
	}
	rel := install(t, "fleet", namespace, []string{"ci/replica-values.yaml"}, merge(fastProbes(), map[string]any{
		"clusterName": cluster,
		"nats":        map[string]any{"urls": []string{srv.URL()}, "layout": "state"},
		"metrics":     map[string]any{"port": bridgeMetrics, "serviceMonitor": map[string]any{"enabled": false}},
		"replica": map[string]any{
			"replicaCount": 1,
			"port":         apiPort,
			"metricsPort":  replicaMetrics,
			// The tokens alone: the set's client CA is a ConfigMap this
			// test has no use for.
			"clientCA": map[string]any{"existingConfigMap": ""},
		},
	}))
	replicaDeployment := releaseDeployment(t, rel.name, namespace, "=replica")
	node := kubelet.NewNode(t, cp.RESTConfig(), kubelet.BridgeImage(t))

	// The bridge first: it creates the stream the replica reads.
	bridge := node.Run(t, kubelet.PodOf(rel.deployment, "5f7d9c8b6-k3j8p"))
	waitReady(t, bridge, 2*time.Minute)

	p := node.Run(t, kubelet.PodOf(replicaDeployment, "6b8c4d9f7-w5n2x"))
	if c := p.Object.Spec.Containers[0]; !slices.Equal(c.Command, []string{"/replica"}) || c.Image != rel.deployment.Spec.Template.Spec.Containers[0].Image {
		t.Fatalf("the replica's container runs %q from %s, want /replica from the bridge's image %s", c.Command, c.Image, rel.deployment.Spec.Template.Spec.Containers[0].Image)
	}
	checkEnv(t, p,
		"REPLICA_BUS=nats",
		"REPLICA_NATS_URL="+srv.URL(),
		"REPLICA_TOKEN_FILE=/etc/replica/tokens/tokens.csv",
		"REPLICA_RULES_FILE=/etc/replica/rules/rules.yaml",
	)
	waitReady(t, p, 2*time.Minute)
	if r, _ := p.Readiness(); r.Code != http.StatusOK {
		t.Errorf("readiness %d %q, want 200 from /readyz", r.Code, r.Body)
	}
	checkConfinement(t, p)

	// The API, over TLS with the certificate the chart generated for the
	// Service's names, and the CA beside it in the Secret.
	tlsSecret, err := admin(t).CoreV1().Secrets(namespace).Get(t.Context(), replicaDeployment.Name+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(tlsSecret.Data["ca.crt"]) {
		t.Fatalf("the Secret %s holds no CA certificate", tlsSecret.Name)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:    roots,
		ServerName: fmt.Sprintf("%s.%s.svc", replicaDeployment.Name, namespace),
	}}}
	get := func(path, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", apiPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}

	apiPath := "/clusters/" + cluster + "/api"
	code, body := get(apiPath, token)
	var versions metav1.APIVersions
	if code != http.StatusOK {
		t.Fatalf("GET %s with the token: %d %s", apiPath, code, body)
	}
	if err := json.Unmarshal([]byte(body), &versions); err != nil || !slices.Equal(versions.Versions, []string{"v1"}) {
		t.Errorf("GET %s: %s (%v), want the APIVersions v1", apiPath, body, err)
	}
	if code, body := get(apiPath, ""); code != http.StatusUnauthorized {
		t.Errorf("GET %s without a token: %d %s, want 401", apiPath, code, body)
	}
	if code, body := get(apiPath, "not-"+token); code != http.StatusUnauthorized {
		t.Errorf("GET %s with another token: %d %s, want 401", apiPath, code, body)
	}

	// The resources of the cluster's discovery document, which the bridge
	// publishes and the replica follows.
	poll.Until(t, time.Minute, func() (bool, string) {
		code, body := get(apiPath+"/v1", token)
		var l metav1.APIResourceList
		if code != http.StatusOK || json.Unmarshal([]byte(body), &l) != nil {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == "configmaps" }),
			"no configmaps among " + strings.TrimSpace(body)
	})
	noRestarts(t, p)

	took, err := p.Stop()
	if err != nil {
		t.Errorf("the replica ended with %v on SIGTERM, want exit 0\n%s", err, p.Logs())
	}
	t.Logf("the replica stopped %s after SIGTERM", took.Round(time.Millisecond))
}
