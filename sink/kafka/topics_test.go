package kafka

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/wire"
)

func TestTopicAndKeyOf(t *testing.T) {
	cm := message(configmaps, "ns", "a", "added", 1)
	ns := message(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "kube-system", "added", 1)
	dep := message(deployments, "ns", "a", "added", 1)
	tests := []struct {
		name, topic string
		want        [][2]string // topic, key of cm, ns and dep
	}{
		{"topic per resource", "", [][2]string{{"kube.configmaps", "ns/a"}, {"kube.namespaces", "kube-system"}, {"kube.deployments.apps", "ns/a"}}},
		{"one topic", "everything", [][2]string{{"everything", "configmaps/ns/a"}, {"everything", "namespaces/kube-system"}, {"everything", "deployments.apps/ns/a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadConfig(t, map[string]string{"BRIDGE_KAFKA_BROKERS": "k:9092", "BRIDGE_KAFKA_TOPIC": tt.topic})
			for i, m := range []*wire.Message{cm, ns, dep} {
				if got := [2]string{c.TopicOf(m.Resource), c.KeyOf(m)}; got != tt.want[i] {
					t.Errorf("%s: topic, key = %v, want %v", m.Subject, got, tt.want[i])
				}
			}
		})
	}
}

// A resource whose topic would pass Kafka's 249 characters, such as a
// custom resource with a long group, is a start-up error that names the
// resource and its topic's length; a topic of exactly 249 is fine.
func TestTopicOfLongGroup(t *testing.T) {
	c := loadConfig(t, map[string]string{"BRIDGE_KAFKA_BROKERS": "k:9092"})
	group := func(n int) string { return strings.Repeat("g", n-len(".example.com")) + ".example.com" }
	fits := schema.GroupVersionResource{Group: group(wire.MaxTopicName - len("kube.widgets.")), Version: "v1", Resource: "widgets"}
	if topics, err := topicsOf(&c, []schema.GroupVersionResource{configmaps, fits}); err != nil || len(topics[1]) != wire.MaxTopicName {
		t.Fatalf("topic of %d characters: %v, %v", len(wire.TopicFor("kube", fits.GroupResource())), topics, err)
	}
	long := schema.GroupVersionResource{Group: group(wire.MaxTopicName - len("kube.widgets.") + 1), Version: "v1", Resource: "widgets"}
	_, err := topicsOf(&c, []schema.GroupVersionResource{configmaps, long})
	if err == nil || !strings.Contains(err.Error(), "widgets."+long.Group[:20]) || !strings.Contains(err.Error(), "250 characters") {
		t.Fatalf("topic of 250 characters: %v, want an error naming the resource and the length", err)
	}
}
