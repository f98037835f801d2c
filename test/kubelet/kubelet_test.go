package kubelet

import (
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestExpand(t *testing.T) {
	env := newEnvList()
	env.set("A", "alpha")
	env.set("B", "$(A)") // values are not expanded twice
	for in, want := range map[string]string{
		"$(A)":       "alpha",
		"x$(A)y":     "xalphay",
		"$(B)":       "$(A)",
		"$(MISSING)": "$(MISSING)",
		"$$(A)":      "$(A)",
		"$$":         "$",
		"$(A":        "$(A",
		"cost $5":    "cost $5",
		"end$":       "end$",
	} {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUser(t *testing.T) {
	n := &Node{image: &Image{config: v1.Config{User: "65532:65532"}}}
	yes, zero := true, int64(0)
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes}}}
	c := &corev1.Container{}
	if uid, gid, err := n.user(pod, c); err != nil || uid != 65532 || gid != 65532 {
		t.Errorf("the image's user: %d:%d, %v", uid, gid, err)
	}
	c.SecurityContext = &corev1.SecurityContext{RunAsUser: &zero}
	if _, _, err := n.user(pod, c); err == nil || !strings.Contains(err.Error(), "runAsNonRoot") {
		t.Errorf("root with runAsNonRoot: %v, want refused", err)
	}
	n.image.config.User = "nonroot"
	if _, _, err := n.user(pod, &corev1.Container{}); err == nil {
		t.Error("a user name: accepted, want refused (runAsNonRoot cannot be checked)")
	}
}

func TestFieldValue(t *testing.T) {
	n := &Node{apiHost: "127.0.0.1"}
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u-1"
	pod.Labels = map[string]string{"app": "bridge"}
	pod.Spec.ServiceAccountName = "sa"
	for path, want := range map[string]string{
		"metadata.name":           "p",
		"metadata.namespace":      "ns",
		"metadata.uid":            "u-1",
		"metadata.labels['app']":  "bridge",
		"spec.serviceAccountName": "sa",
		"status.podIP":            "127.0.0.1",
	} {
		if got, err := n.fieldValue(pod, path); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := n.fieldValue(pod, "spec.priority"); err == nil {
		t.Error("an unknown field: resolved, want an error")
	}
}

func TestResourceValue(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "bridge",
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("1")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		},
	}}}}
	for _, tc := range []struct {
		res, divisor, want string
	}{
		{"limits.memory", "", "536870912"},
		{"limits.memory", "1Mi", "512"},
		{"limits.memory", "1G", "1"}, // rounded up
		{"limits.cpu", "", "1"},
		{"requests.cpu", "", "1"}, // 100m rounds up to 1
		{"requests.cpu", "1m", "100"},
	} {
		ref := &corev1.ResourceFieldSelector{ContainerName: "bridge", Resource: tc.res}
		if tc.divisor != "" {
			ref.Divisor = resource.MustParse(tc.divisor)
		}
		if got, err := resourceValue(pod, ref); err != nil || got != tc.want {
			t.Errorf("%s / %q = %q, %v; want %s", tc.res, tc.divisor, got, err, tc.want)
		}
	}
	if _, err := resourceValue(pod, &corev1.ResourceFieldSelector{Resource: "requests.memory"}); err == nil {
		t.Error("a request the container does not set: resolved, want an error")
	}
}
