// Package synthetic makes realistic Kubernetes objects, and the deltas the
// source would make of them, for benchmarks: ConfigMaps of about 1 KiB and
// Pods of about 10 KiB as JSON, shaped like those of a busy production
// cluster. Object i is the same every time it is made.
package synthetic

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubebus/bridge/source"
)

// The resources of the synthetic objects, as source.Resolve resolves them.
var (
	ConfigMaps = source.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Kind:                 "ConfigMap", Namespaced: true,
	}
	Pods = source.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Kind:                 "Pod", Namespaced: true,
	}
)

// objectTime is the creation time of every synthetic object.
var objectTime = metav1.NewTime(time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC))

// ConfigMap is ConfigMap i, about 1 KiB as JSON: the metadata an
// application's ConfigMap carries (labels, an annotation or two, no
// managedFields, which the source drops) and a few settings.
func ConfigMap(i int) *corev1.ConfigMap {
	ns := fmt.Sprintf("team-%02d", i%40)
	name := fmt.Sprintf("app-%05d-settings", i)
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			UID:               types.UID(fmt.Sprintf("6f1c2d3e-%04x-4000-8000-%012x", i%0x10000, i)),
			ResourceVersion:   strconv.Itoa(1_000_000 + i),
			CreationTimestamp: objectTime,
			Labels: map[string]string{
				"app.kubernetes.io/name":       fmt.Sprintf("app-%05d", i),
				"app.kubernetes.io/part-of":    "storefront",
				"app.kubernetes.io/managed-by": "helm",
			},
			Annotations: map[string]string{
				"meta.helm.sh/release-name":      fmt.Sprintf("app-%05d", i),
				"meta.helm.sh/release-namespace": ns,
			},
		},
		Data: map[string]string{
			"LOG_LEVEL":        "info",
			"HTTP_PORT":        "8080",
			"DATABASE_URL":     fmt.Sprintf("postgres://app-%05d@db.%s.svc.cluster.local:5432/app?sslmode=require", i, ns),
			"FEATURE_FLAGS":    "checkout-v2,search-suggestions,recommendations",
			"CACHE_TTL":        "300s",
			"application.yaml": "server:\n  port: 8080\n  shutdown: graceful\nspring:\n  datasource:\n    hikari:\n      maximum-pool-size: 20\n      connection-timeout: 30000\nmanagement:\n  endpoints:\n    web:\n      exposure:\n        include: health,info,prometheus\n",
		},
	}
}

// Pod is Pod i, about 10 KiB as JSON: a Deployment's pod with an
// application container and a sidecar, environment, probes, volumes, and
// the status of a running pod.
func Pod(i int) *corev1.Pod {
	ns := fmt.Sprintf("team-%02d", i%40)
	app := fmt.Sprintf("web-%04d", i/3)
	name := fmt.Sprintf("%s-7d9f8b6c5d-%05d", app, i)
	labels := map[string]string{
		"app.kubernetes.io/name":      app,
		"app.kubernetes.io/instance":  app + "-prod",
		"app.kubernetes.io/version":   "2.14.3",
		"app.kubernetes.io/component": "frontend",
		"app.kubernetes.io/part-of":   "storefront",
		"pod-template-hash":           "7d9f8b6c5d",
	}
	env := func(prefix string, n int) []corev1.EnvVar {
		var out []corev1.EnvVar
		for j := range n {
			out = append(out, corev1.EnvVar{Name: fmt.Sprintf("%s_SETTING_%02d", prefix, j), Value: fmt.Sprintf("value-%02d-%s", j, strings.Repeat("x", 12))})
		}
		out = append(out,
			corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
			corev1.EnvVar{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-db"}, Key: "password"}}},
		)
		return out
	}
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	probe := func(path string, delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: delay, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/app", ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "kube-api-access-" + fmt.Sprintf("%05d", i), MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	started := metav1.NewTime(objectTime.Add(42 * time.Second))
	status := func(name, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: name, Ready: true, Started: new(true), Image: image,
			ImageID:     image + "@sha256:" + strings.Repeat("3f9a1c", 10) + "abcd",
			ContainerID: "containerd://" + strings.Repeat("8e4b2d", 10) + fmt.Sprintf("%04x", i%0x10000),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}
	}
	condition := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, GenerateName: app + "-7d9f8b6c5d-",
			UID:               types.UID(fmt.Sprintf("9b2e4f10-%04x-4000-8000-%012x", i%0x10000, i)),
			ResourceVersion:   strconv.Itoa(2_000_000 + i),
			CreationTimestamp: objectTime,
			Labels:            labels,
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-11-19T17:02:11Z",
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8b6c5d",
				UID: types.UID(fmt.Sprintf("0c7d5e2a-%04x-4000-8000-%012x", i/3%0x10000, i/3)), Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{
					Name: "app", Image: "registry.example.com/storefront/web:2.14.3",
					Args:  []string{"--config=/etc/app/application.yaml", "--port=8080", "--metrics-port=9090"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
					Env:   env("APP", 48), Resources: res("250m", "512Mi"), VolumeMounts: mounts,
					LivenessProbe: probe("/healthz", 10), ReadinessProbe: probe("/readyz", 5),
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent,
					SecurityContext: &corev1.SecurityContext{
						RunAsNonRoot: new(true), ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					},
				},
				{
					Name: "proxy", Image: "registry.example.com/mesh/proxy:1.22.0",
					Args:  []string{"proxy", "sidecar", "--domain", ns + ".svc.cluster.local", "--log-level=warning"},
					Ports: []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}},
					Env:   env("PROXY", 16), Resources: res("100m", "128Mi"), VolumeMounts: mounts[2:],
					ReadinessProbe:         probe("/healthz/ready", 1),
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy: corev1.PullIfNotPresent,
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}, DefaultMode: new(int32(420))}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access-" + fmt.Sprintf("%05d", i), VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: new(int32(420)),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: new(int64(3607)), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
					},
				}}},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: new(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            app,
			NodeName:                      fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%16, i%250),
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: new(int64(10001)), FSGroup: new(int64(10001))},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100,
					PodAffinityTerm: corev1.PodAffinityTerm{
						TopologyKey:   "topology.kubernetes.io/zone",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": app}},
					},
				}},
			}},
			PriorityClassName:  "production",
			Priority:           new(int32(100000)),
			EnableServiceLinks: new(false),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				condition(corev1.PodReadyToStartContainers), condition(corev1.PodInitialized),
				condition(corev1.PodReady), condition(corev1.ContainersReady), condition(corev1.PodScheduled),
			},
			HostIP:    fmt.Sprintf("10.0.%d.%d", i%16, i%250),
			HostIPs:   []corev1.HostIP{{IP: fmt.Sprintf("10.0.%d.%d", i%16, i%250)}},
			PodIP:     fmt.Sprintf("10.1.%d.%d", i/250%250, i%250),
			PodIPs:    []corev1.PodIP{{IP: fmt.Sprintf("10.1.%d.%d", i/250%250, i%250)}},
			StartTime: &started,
			QOSClass:  corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{
				status("app", "registry.example.com/storefront/web:2.14.3"),
				status("proxy", "registry.example.com/mesh/proxy:1.22.0"),
			},
		},
	}
}

// Unstructured is obj as informers of the dynamic client hold it.
func Unstructured(obj runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		// Only a type the converter cannot handle fails, and the objects
		// of this package are plain API types.
		panic("synthetic: " + err.Error())
	}
	return &unstructured.Unstructured{Object: m}
}

// Update is the update of obj, a resource r object, as the source hands it
// on from a watch: an unstructured object without managedFields.
func Update(r source.Resource, obj runtime.Object, observed time.Time) source.Delta {
	u := Unstructured(obj)
	return source.Delta{
		Type:            source.Updated,
		Resource:        r,
		Namespace:       u.GetNamespace(),
		Name:            u.GetName(),
		UID:             u.GetUID(),
		ResourceVersion: u.GetResourceVersion(),
		Observed:        observed,
		Object:          u,
	}
}
