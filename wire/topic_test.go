package wire

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTopicFor(t *testing.T) {
	tests := []struct {
		prefix string
		gr     schema.GroupResource
		want   string
	}{
		{"kube", schema.GroupResource{Resource: "configmaps"}, "kube.configmaps"},
		{"kube", schema.GroupResource{Group: "apps", Resource: "deployments"}, "kube.deployments.apps"},
		{"prod-eu", schema.GroupResource{Group: "example.com", Resource: "widgets"}, "prod-eu.widgets.example.com"},
		{"kube", schema.GroupResource{Resource: "namespaces"}, "kube.namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := TopicFor(tt.prefix, tt.gr); got != tt.want {
				t.Errorf("TopicFor(%q, %v) = %q, want %q", tt.prefix, tt.gr, got, tt.want)
			}
			if err := CheckTopicName(tt.want); err != nil {
				t.Errorf("CheckTopicName(%q): %v", tt.want, err)
			}
		})
	}
}
