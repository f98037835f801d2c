package chart

import (
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubebus/bridge/internal/config"
)

// renderCases says, per value set, which objects the chart renders and
// what the bridge's configuration must be.
var renderCases = map[string]struct {
	objects []string // kind namespace/name, sorted
	config  func(t *testing.T, c *config.Config)
}{
	"all-namespaces": {
		objects: []string{
			"ClusterRole /cdc-system-cdc-bridge",
			"ClusterRoleBinding /cdc-system-cdc-bridge",
			"Deployment cdc-system/cdc-bridge",
			"PersistentVolumeClaim cdc-system/cdc-bridge-checkpoint",
			"Service cdc-system/cdc-bridge-metrics",
			"ServiceAccount cdc-system/cdc-bridge",
		},
		config: func(t *testing.T, c *config.Config) {
			want(t, "BRIDGE_RESOURCES", c.Resources, []string{"configmaps", "deployments.apps", "widgets.example.com", "namespaces"})
			want(t, "BRIDGE_NAMESPACES", c.Namespaces, []string(nil))
			want(t, "BRIDGE_CLUSTER_NAME", c.ClusterName, "prod-eu-1")
			want(t, "BRIDGE_SINK", c.Sink, "stdout")
			want(t, "BRIDGE_CHECKPOINT", c.Checkpoint, "file:/var/lib/bridge/checkpoint.db")
			want(t, "BRIDGE_CHECKPOINT_FRESH_START", c.CheckpointFreshStart, false)
			want(t, "BRIDGE_LEADER_ELECTION", c.LeaderElection, false)
			want(t, "BRIDGE_METRICS_ADDR", c.MetricsAddr, ":9090")
			want(t, "BRIDGE_FILTER (unset)", c.View, config.ViewConfig{})
		},
	},
	"two-namespaces": {
		objects: []string{
			"ClusterRole /bridge-teams-bridge",
			"ClusterRoleBinding /bridge-teams-bridge",
			"Deployment bridge/teams-bridge",
			"PersistentVolumeClaim bridge/teams-bridge-checkpoint",
			"Role team-a/teams-bridge",
			"Role team-b/teams-bridge",
			"RoleBinding team-a/teams-bridge",
			"RoleBinding team-b/teams-bridge",
			"Service bridge/teams-bridge-metrics",
			"ServiceAccount bridge/teams-bridge",
		},
		config: func(t *testing.T, c *config.Config) {
			want(t, "BRIDGE_RESOURCES", c.Resources, []string{"configmaps", "services", "jobs.batch", "nodes", "clusterwidgets.example.com"})
			want(t, "BRIDGE_NAMESPACES", c.Namespaces, []string{"team-a", "team-b"})
			want(t, "BRIDGE_LABEL_SELECTOR", c.LabelSelector, "app.kubernetes.io/part-of=shop")
			want(t, "BRIDGE_CHECKPOINT_INTERVAL", c.CheckpointInterval, 2*time.Second)
			want(t, "BRIDGE_SHUTDOWN_TIMEOUT", c.ShutdownTimeout, 90*time.Second)
			want(t, "BRIDGE_CHECKPOINT_FRESH_START", c.CheckpointFreshStart, true)
			want(t, "BRIDGE_LOG_LEVEL", c.LogLevel, "debug")
			want(t, "BRIDGE_LOG_FORMAT", c.LogFormat, "text")
			want(t, "BRIDGE_LEADER_ELECTION", c.LeaderElection, false)
		},
	},
	"nats-kv-ha": {
		objects: []string{
			"ClusterRole /messaging-ha-bridge",
			"ClusterRoleBinding /messaging-ha-bridge",
			"ConfigMap messaging/ha-bridge-dashboard",
			"Deployment messaging/ha-bridge",
			"PodDisruptionBudget messaging/ha-bridge",
			"PrometheusRule messaging/ha-bridge",
			"Role messaging/ha-bridge-leader-election",
			"RoleBinding messaging/ha-bridge-leader-election",
			"Service messaging/ha-bridge-metrics",
			"ServiceAccount messaging/ha-bridge",
			"ServiceMonitor messaging/ha-bridge",
		},
		config: func(t *testing.T, c *config.Config) {
			want(t, "BRIDGE_RESOURCES", c.Resources, []string{"deployments.apps", "statefulsets.apps", "pods"})
			want(t, "BRIDGE_SINK", c.Sink, "nats")
			want(t, "BRIDGE_CHECKPOINT", c.Checkpoint, "nats-kv:bridge-checkpoint")
			want(t, "BRIDGE_LEADER_ELECTION", c.LeaderElection, true)
			want(t, "BRIDGE_LEADER_ELECTION_NAME", c.LeaderElectionName, "ha-bridge")
			want(t, "BRIDGE_LEADER_ELECTION_NAMESPACE", c.LeaderElectionNamespace, "messaging")
			want(t, "BRIDGE_LEADER_ELECTION_IDENTITY", c.LeaderElectionIdentity, podName)
			want(t, "BRIDGE_LEADER_ELECTION_LEASE_DURATION", c.LeaseDuration, 20*time.Second)
			want(t, "BRIDGE_NATS_URL", c.NATS.URL, "tls://nats-0.nats.messaging.svc:4222,tls://nats-1.nats.messaging.svc:4222")
			want(t, "BRIDGE_NATS_CREDS_FILE", filepath.Base(c.NATS.CredsFile), "nats.creds")
			want(t, "BRIDGE_NATS_TLS_CA_FILE", filepath.Base(c.NATS.TLSFiles.CAFile), "nats-ca.pem")
			want(t, "BRIDGE_NATS_STREAM", c.NATS.Stream, "KUBE_PROD")
			want(t, "BRIDGE_NATS_LAYOUT", c.NATS.Layout, "state")
			want(t, "BRIDGE_NATS_DELETE_TTL", c.NATS.DeleteTTL, 36*time.Hour)
			want(t, "BRIDGE_NATS_STREAM_REPLICAS", c.NATS.StreamReplicas, 3)
			want(t, "BRIDGE_NATS_DUPLICATE_WINDOW", c.NATS.DuplicateWindow, 20*time.Minute)
			want(t, "BRIDGE_WORKERS", c.Workers, 8)
			want(t, "BRIDGE_MAX_PENDING_PER_OBJECT", c.MaxPendingPerObject, 32)
			want(t, "BRIDGE_MAX_PENDING_BYTES", c.MaxPendingBytes, int64(32<<20))
			want(t, "BRIDGE_FILTER", c.View.Filter, `resource != "pods" || !(object.status.phase in ["Succeeded", "Failed"])`)
			want(t, "BRIDGE_FIELDS", c.View.Fields, "")
			want(t, "BRIDGE_DROP_FIELDS", c.View.DropFields, `status,metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`)
		},
	},
	"kafka-sasl": {
		objects: []string{
			"Deployment payments/payments-cdc-bridge",
			"Role payments/payments-cdc-bridge",
			"RoleBinding payments/payments-cdc-bridge",
			"Service payments/payments-cdc-bridge-metrics",
			"ServiceAccount payments/payments-cdc-bridge",
		},
		config: func(t *testing.T, c *config.Config) {
			want(t, "BRIDGE_RESOURCES", c.Resources, []string{"configmaps", "ingresses.networking.k8s.io"})
			want(t, "BRIDGE_NAMESPACES", c.Namespaces, []string{"payments"})
			want(t, "BRIDGE_SINK", c.Sink, "kafka")
			want(t, "BRIDGE_CHECKPOINT", c.Checkpoint, "kafka:kube.bridge-checkpoint")
			want(t, "BRIDGE_KAFKA_BROKERS", c.Kafka.Brokers, []string{"kafka-0.kafka.streaming.svc:9093", "kafka-1.kafka.streaming.svc:9093"})
			want(t, "BRIDGE_KAFKA_REPLICATION_FACTOR", c.Kafka.ReplicationFactor, 3)
			want(t, "BRIDGE_KAFKA_LAYOUT", c.Kafka.Layout, "state")
			want(t, "BRIDGE_KAFKA_DELETE_RETENTION", c.Kafka.DeleteRetention, 12*time.Hour)
			want(t, "BRIDGE_KAFKA_TOPIC_CONFIGS", c.Kafka.TopicConfigs, "cleanup.policy=compact,max.compaction.lag.ms=604800000,min.insync.replicas=2")
			want(t, "BRIDGE_KAFKA_COMPRESSION", c.Kafka.Compression, "zstd")
			want(t, "BRIDGE_KAFKA_MAX_MESSAGE_BYTES", c.Kafka.MaxMessageBytes, 4194304)
			want(t, "BRIDGE_KAFKA_TLS", c.Kafka.TLS, true)
			want(t, "BRIDGE_KAFKA_TLS_CA_FILE", filepath.Base(c.Kafka.TLSFiles.CAFile), "kafka-ca.pem")
			want(t, "BRIDGE_KAFKA_SASL_MECHANISM", c.Kafka.SASLMechanism, "scram-sha-512")
			want(t, "BRIDGE_KAFKA_SASL_USERNAME", c.Kafka.SASLUsername, "bridge")
			want(t, "BRIDGE_KAFKA_BATCH_TIMEOUT (from extraEnv)", c.Kafka.BatchTimeout, 20*time.Millisecond)
			want(t, "BRIDGE_FILTER", c.View.Filter, "")
			want(t, "BRIDGE_FIELDS", c.View.Fields, "data,spec.rules,metadata.labels")
			want(t, "BRIDGE_DROP_FIELDS", c.View.DropFields, "")
			want(t, "BRIDGE_LEADER_ELECTION", c.LeaderElection, false)
		},
	},
}

// podName stands for the pod's name in the downward API.
const podName = "bridge-7c9d8-x2x4q"

// TestRender renders each value set and checks the objects, the pod's
// security and probes, and that the bridge's own configuration loader
// accepts the environment the chart gives it, with the values meant.
func TestRender(t *testing.T) {
	t.Parallel()
	known := bridgeVariables(t)
	for _, s := range valueSets {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			rc, ok := renderCases[s.name]
			if !ok {
				t.Fatalf("no render case for value set %s", s.name)
			}
			v := s.values(t)
			objs := render(t, s)

			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, rc.objects) {
				t.Errorf("rendered objects:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(rc.objects, "\n  "))
			}

			d := deployment(t, objs)
			checkPod(t, s, v, d)
			checkSelectors(t, objs, d)
			checkWritablePaths(t, d)
			checkSecrets(t, v, d)

			environ := environment(t, s, d, known)
			c, err := config.Load(environ)
			if err != nil {
				t.Fatalf("the bridge refuses the chart's environment: %v\n%s", err, strings.Join(environ, "\n"))
			}
			rc.config(t, c)
			checkGrace(t, d, c)
		})
	}
}

// checkGrace checks that the pod's grace period exceeds the bridge's
// whole shutdown budget (BRIDGE_SHUTDOWN_TIMEOUT, from SIGTERM to exit),
// so that the kubelet never kills it inside it.
func checkGrace(t *testing.T, d *appsv1.Deployment, c *config.Config) {
	t.Helper()
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Errorf("no terminationGracePeriodSeconds, want more than BRIDGE_SHUTDOWN_TIMEOUT=%s", c.ShutdownTimeout)
	} else if time.Duration(*grace)*time.Second <= c.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %d, want more than BRIDGE_SHUTDOWN_TIMEOUT=%s", *grace, c.ShutdownTimeout)
	}
}

// checkPod checks the pod template's security, probes, resources and
// replicas.
func checkPod(t *testing.T, s valueSet, v setValues, d *appsv1.Deployment) {
	t.Helper()
	replicas := 1
	if v.ReplicaCount != nil {
		replicas = *v.ReplicaCount
	}
	if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != replicas {
		t.Errorf("replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	wantStrategy := appsv1.RecreateDeploymentStrategyType
	if v.leaderElection() && v.Checkpoint.Type != "file" {
		wantStrategy = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type != wantStrategy {
		t.Errorf("strategy %s, want %s", d.Spec.Strategy.Type, wantStrategy)
	}

	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != s.fullname {
		t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, s.fullname)
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Error("enableServiceLinks is not false: Services would add BRIDGE_* variables")
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	sc := ctr.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is not read-only")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation is allowed")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop [ALL] and add none", sc.Capabilities)
	}

	var metricsPort int32
	for _, p := range ctr.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort == 0 {
		t.Error("no container port named metrics")
	}
	for name, probe := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"liveness": {ctr.LivenessProbe, "/healthz"}, "readiness": {ctr.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path || probe.p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %+v, want GET %s on port metrics", name, probe.p, probe.path)
		}
	}
	if env := envValue(ctr.Env, "BRIDGE_METRICS_ADDR"); env != ":"+strconv.Itoa(int(metricsPort)) {
		t.Errorf("BRIDGE_METRICS_ADDR %q, want :%d", env, metricsPort)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ctr.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := ctr.Resources.Limits[r]; !ok {
			t.Errorf("no %s limit", r)
		}
	}
}

// checkSelectors checks that the Service, the PodDisruptionBudget and the
// ServiceMonitor select what they should.
func checkSelectors(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	podLabels := labels.Set(d.Spec.Template.Labels)
	for _, o := range only(objs, "Service") {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(podLabels) {
			t.Errorf("Service %s selector %v does not select the pods %v", o.GetName(), sel, podLabels)
		}
		ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		if len(ports) != 1 || ports[0].(map[string]any)["targetPort"] != "metrics" {
			t.Errorf("Service %s ports %v, want one to targetPort metrics", o.GetName(), ports)
		}
	}
	for _, o := range only(objs, "PodDisruptionBudget") {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(podLabels) {
			t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", sel, podLabels)
		}
	}
	for _, o := range only(objs, "ServiceMonitor") {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		svcs := only(objs, "Service")
		if len(svcs) != 1 || !labels.SelectorFromSet(sel).Matches(labels.Set(svcs[0].GetLabels())) {
			t.Errorf("ServiceMonitor selector %v does not select the metrics Service", sel)
		}
	}
}

// checkWritablePaths: with a read-only root filesystem, the checkpoint file
// must be on a volume, and that volume must be the checkpoint claim.
func checkWritablePaths(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ctr := d.Spec.Template.Spec.Containers[0]
	path, ok := strings.CutPrefix(envValue(ctr.Env, "BRIDGE_CHECKPOINT"), "file:")
	if !ok {
		return
	}
	for _, m := range ctr.VolumeMounts {
		if strings.HasPrefix(path, m.MountPath+"/") && !m.ReadOnly {
			for _, vol := range d.Spec.Template.Spec.Volumes {
				if vol.Name == m.Name && vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == d.Name+"-checkpoint" {
					return
				}
			}
			t.Errorf("checkpoint %s is on volume %s, want the claim %s-checkpoint", path, m.Name, d.Name)
			return
		}
	}
	t.Errorf("checkpoint %s is on no writable volume", path)
}

// checkSecrets: passwords and tokens come only from secretKeyRef to the
// existing Secret; no secret is ever a literal value.
func checkSecrets(t *testing.T, v setValues, d *appsv1.Deployment) {
	t.Helper()
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if !strings.HasSuffix(e.Name, "_PASSWORD") && !strings.HasSuffix(e.Name, "_TOKEN") {
			continue
		}
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != v.ExistingSecret {
			t.Errorf("%s is not read from Secret %q: %+v", e.Name, v.ExistingSecret, e)
		}
	}
}

func want[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %#v, want %#v", what, got, want)
	}
}
