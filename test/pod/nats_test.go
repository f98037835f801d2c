package pod

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kubebus/bridge/consumer"
	natsconsumer "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/test/kubelet"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

// natsValues are the test's values on top of charts/bridge/ci's
// nats-kv-ha set: this machine's NATS server, which takes a user and
// password and a client certificate (the set's credentials file needs an
// operator this server does not run), a stream of one replica (one
// server), a metrics port of the pod's own, probes every second, and
// neither ServiceMonitor nor PrometheusRule (this API server has no
// Prometheus Operator's CRDs).
func natsValues(srv *natstest.Server, metricsPort, replicas int) map[string]any {
	return merge(fastProbes(), map[string]any{
		"replicaCount": replicas,
		"nats": map[string]any{
			"urls":           []string{"tls://" + strings.TrimPrefix(srv.URL(), "nats://")},
			"credsKey":       "",
			"user":           "bridge",
			"passwordKey":    "nats-password",
			"tls":            map[string]any{"caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"},
			"streamReplicas": 1,
		},
		"metrics":        map[string]any{"port": metricsPort, "serviceMonitor": map[string]any{"enabled": false}},
		"prometheusRule": map[string]any{"enabled": false},
	})
}

// natsServer is a NATS server with TLS and a password, and the Secret the
// nats-kv-ha set names, with the password and the TLS files, in namespace.
func natsServer(t *testing.T, namespace string) *natstest.Server {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{TLS: true, User: "bridge", Password: "nats-pw-7f3a"})
	createNamespace(t, namespace)
	createSecret(t, namespace, "nats-credentials", map[string][]byte{
		"nats-password": []byte("nats-pw-7f3a"),
		"ca.crt":        readFile(t, srv.TLS.CAFile),
		"tls.crt":       readFile(t, srv.TLS.CertFile),
		"tls.key":       readFile(t, srv.TLS.KeyFile),
	})
	return srv
}

// changeDeploymentsOnNATS creates the namespace apps with the Deployments
// web, api and batch, relabels web and deletes batch, and waits until
// the bridge's NATS stream on srv holds what the API server does. It
// returns a ListerWatcher of the stream's Deployments.
func changeDeploymentsOnNATS(t *testing.T, cs kubernetes.Interface, srv *natstest.Server, apps string) *consumer.ListerWatcher {
	t.Helper()
	createNamespace(t, apps)
	for _, name := range []string{"web", "api", "batch"} {
		if _, err := cs.AppsV1().Deployments(apps).Create(t.Context(), deployment(apps, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel(t, cs, apps, "web", "tier", "front")
	if err := cs.AppsV1().Deployments(apps).Delete(t.Context(), "batch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lw := deploymentsOnNATS(t, srv)
	waitSameState(t, lw, deployments, apps, 30*time.Second)
	return lw
}

// deploymentsOnNATS reads the Deployments the nats-kv-ha set's bridge
// publishes, as a consumer of the stream would.
func deploymentsOnNATS(t *testing.T, srv *natstest.Server) *consumer.ListerWatcher {
	t.Helper()
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	lw, err := natsconsumer.NewListerWatcher(js, natsconsumer.Config{Stream: "KUBE_PROD"}, consumer.Options{
		Cluster:  "prod-eu-1",
		Resource: schema.GroupResource{Group: "apps", Resource: "deployments"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lw.Close() })
	return lw
}

// TestChartPodNATS runs the pod of the nats-kv-ha value set: ready by its
// probe, streaming changes, not ready while NATS is down and alive all
// along, ready again and caught up once NATS is back, and stopped within
// its grace period.
func TestChartPodNATS(t *testing.T) {
	t.Parallel()
	const namespace, apps = "messaging", "shop"
	srv := natsServer(t, namespace)
	rel := install(t, "ha", namespace, []string{"ci/nats-kv-ha-values.yaml"}, natsValues(srv, freePort(t), 1))
	node := kubelet.NewNode(t, cp.RESTConfig(), kubelet.BridgeImage(t))
	p := node.Run(t, kubelet.PodOf(rel.deployment, "6c9f8d7b5-q2w4e"))

	// What the pod was given, as the kubelet resolved it.
	checkEnv(t, p,
		"BRIDGE_NATS_PASSWORD=nats-pw-7f3a",
		"BRIDGE_NATS_TLS_CA_FILE=/etc/bridge/credentials/nats-ca.pem",
		"BRIDGE_CHECKPOINT=nats-kv:bridge-checkpoint",
		"KUBERNETES_SERVICE_HOST=127.0.0.1",
	)
	waitReady(t, p, 2*time.Minute)
	checkConfinement(t, p)

	cs := admin(t)
	lw := changeDeploymentsOnNATS(t, cs, srv, apps)
	kv, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := kv.KeyValue(t.Context(), "bridge-checkpoint")
	if err != nil {
		t.Fatalf("the nats-kv checkpoint bucket: %v", err)
	}
	if keys, err := bucket.ListKeys(t.Context()); err != nil {
		t.Fatal(err)
	} else {
		n := 0
		for range keys.Keys() {
			n++
		}
		if n == 0 {
			t.Error("the checkpoint bucket holds no entry")
		}
	}

	// NATS goes away: the pod is not ready, saying why, and stays alive.
	srv.Shutdown()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		r, _ := p.Readiness()
		return !p.Ready(), "readiness still passing: " + r.Body
	})
	if r, _ := p.Readiness(); r.Code != 503 || !strings.Contains(r.Body, "nats") {
		t.Errorf("readiness during the outage: %d %q, want 503 naming the NATS sink", r.Code, r.Body)
	}
	if _, err := cs.AppsV1().Deployments(apps).Create(t.Context(), deployment(apps, "during-outage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, ok := p.Liveness(); !ok || !r.OK {
		t.Errorf("liveness during the outage: %+v", r)
	}
	srv.Start()
	waitReady(t, p, time.Minute)
	waitSameState(t, lw, deployments, apps, 30*time.Second)
	noRestarts(t, p)

	took, err := p.Stop()
	if err != nil {
		t.Errorf("the bridge ended with %v on SIGTERM, want exit 0\n%s", err, p.Logs())
	}
	t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))
}
