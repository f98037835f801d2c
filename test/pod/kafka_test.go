package pod

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/consumer"
	kafkaconsumer "github.com/kubebus/bridge/consumer/kafka"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/kubelet"
	"github.com/kubebus/bridge/test/tlstest"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// TestChartPodKafka runs the pod of the kafka-sasl value set (charts/
// bridge/ci): Kafka over TLS, with the brokers' CA and the SCRAM-SHA-512
// password from an existing Secret, and the checkpoint in a compacted
// topic. Only the brokers' addresses, the metrics port and the probes'
// period are the test's own values. The pod turns ready and what the
// topic holds equals a LIST.
func TestChartPodKafka(t *testing.T) {
	t.Parallel()
	const namespace, password = "payments", "scram-pw-91c2"
	pki := tlstest.NewPKI(t)
	// The set gives the bridge the brokers' CA and no client certificate.
	server := pki.Server.Clone()
	server.ClientAuth = tls.NoClientCert
	kc := kafkatest.Start(t, kafkatest.WithTLS(server, pki.Client), kafkatest.WithSASL("SCRAM-SHA-512", "bridge", password))
	createNamespace(t, namespace)
	createSecret(t, namespace, "kafka-credentials", map[string][]byte{
		"sasl-password": []byte(password),
		"ca.crt":        readFile(t, pki.CAFile),
	})
	rel := install(t, "payments-cdc", namespace, []string{"ci/kafka-sasl-values.yaml"}, merge(fastProbes(), map[string]any{
		"kafka":   map[string]any{"brokers": kc.Addrs()},
		"metrics": map[string]any{"port": freePort(t)},
	}))
	node := kubelet.NewNode(t, cp.RESTConfig(), kubelet.BridgeImage(t))
	p := node.Run(t, kubelet.PodOf(rel.deployment, "84d5f6c7b-x8k2m"))
	checkEnv(t, p,
		"BRIDGE_KAFKA_SASL_PASSWORD="+password,
		"BRIDGE_KAFKA_SASL_MECHANISM=scram-sha-512",
		"BRIDGE_KAFKA_TLS_CA_FILE=/etc/bridge/credentials/kafka-ca.pem",
		"BRIDGE_CHECKPOINT=kafka:kube.bridge-checkpoint",
	)
	waitReady(t, p, 2*time.Minute)

	cms := admin(t).CoreV1().ConfigMaps(namespace)
	for i := range 4 {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rates-%d", i), Namespace: namespace},
			Data:       map[string]string{"eur": fmt.Sprint(i)},
		}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := cms.Get(t.Context(), "rates-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["usd"] = "1.08"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(t.Context(), "rates-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	lw, err := kafkaconsumer.NewListerWatcher(kc.Client(), kafkaconsumer.Config{}, consumer.Options{
		Cluster:  "prod-eu-1",
		Resource: schema.GroupResource{Resource: "configmaps"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lw.Close() })
	waitSameState(t, lw, configMaps, namespace, time.Minute)
	if offsets := kc.EndOffsets("kube.bridge-checkpoint"); len(offsets) == 0 {
		t.Error("the checkpoint topic kube.bridge-checkpoint does not exist")
	}
	noRestarts(t, p)
	if _, err := p.Stop(); err != nil {
		t.Errorf("the bridge ended with %v on SIGTERM, want exit 0", err)
	}
}
