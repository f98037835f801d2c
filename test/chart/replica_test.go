package chart

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	replicaaccess "github.com/kubebus/bridge/internal/replica/access"
)

// replicaSet is ci/replica-values.yaml: a bridge that publishes to NATS
// and the replica that reads it, with a generated certificate, client
// certificates from a ConfigMap, a token file and inline rules.
var replicaSet = valueSet{name: "replica", release: "fleet", namespace: "kubebus", fullname: "fleet-bridge"}

// replicaName is what the chart names the replica's objects in replicaSet.
const replicaName = "fleet-bridge-replica"

// replicaVariables is the replica's environment contract, as cmd/replica
// reads it. The chart sets no other REPLICA_* variable.
var replicaVariables = []string{
	"REPLICA_BUS", "REPLICA_NATS_URL", "REPLICA_NATS_STREAM", "REPLICA_NATS_SUBJECT_PREFIX", "REPLICA_NATS_SUBJECT",
	"REPLICA_KAFKA_BROKERS", "REPLICA_KAFKA_TOPIC_PREFIX", "REPLICA_LISTEN", "REPLICA_TLS_CERT_FILE", "REPLICA_TLS_KEY_FILE",
	"REPLICA_CLIENT_CA_FILE", "REPLICA_TOKEN_FILE", "REPLICA_RULES_FILE", "REPLICA_METRICS_ADDR", "REPLICA_WATCH_QUEUE",
	"REPLICA_LOG_LEVEL",
	"REPLICA_NATS_USER", "REPLICA_NATS_PASSWORD", "REPLICA_NATS_TOKEN", "REPLICA_NATS_CREDS_FILE", "REPLICA_NATS_NKEY_SEED_FILE",
	"REPLICA_NATS_TLS_CA_FILE", "REPLICA_NATS_TLS_CERT_FILE", "REPLICA_NATS_TLS_KEY_FILE",
	"REPLICA_KAFKA_TLS", "REPLICA_KAFKA_TLS_CA_FILE", "REPLICA_KAFKA_TLS_CERT_FILE", "REPLICA_KAFKA_TLS_KEY_FILE", "REPLICA_KAFKA_TLS_SERVER_NAME",
	"REPLICA_KAFKA_SASL_MECHANISM", "REPLICA_KAFKA_SASL_USERNAME", "REPLICA_KAFKA_SASL_PASSWORD",
}

// replicaAuth is the least the replica needs besides a bus: rules and a
// way to authenticate.
var replicaAuth = []string{
	"--set", "replica.enabled=true",
	"--set", "replica.tokens.existingSecret=replica-tokens",
	"--set-json", `replica.rules.grants=[{"subjects":[{"kind":"User","name":"alice"}],"clusters":["prod"],"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["list"]}]}]`,
}

// namedDeployment returns the Deployment called name among objs.
func namedDeployment(t testing.TB, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	for _, o := range only(objs, "Deployment") {
		if o.GetName() != name {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
			t.Fatalf("Deployment %s: %v", name, err)
		}
		return &d
	}
	t.Fatalf("no Deployment %s rendered", name)
	return nil
}

// named returns the object of kind called name among objs, or nil.
func named(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range only(objs, kind) {
		if o.GetName() == name {
			return o
		}
	}
	return nil
}

// replicaEnv is the replica container's environment by name: literal
// values, and "valueFrom" for the others.
func replicaEnv(t testing.TB, d *appsv1.Deployment) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s is set twice", e.Name)
		}
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = "valueFrom"
		}
		if strings.HasPrefix(e.Name, "REPLICA_") && !slices.Contains(replicaVariables, e.Name) {
			t.Errorf("the chart sets %s, which the replica does not read", e.Name)
		}
	}
	return env
}

// fileSource says where a file in the replica's container comes from: the
// kind and name of the Secret or ConfigMap, and the key.
type fileSource struct{ kind, name, key string }

// sourceOf finds the volume mounted at file's directory in the replica's
// container and the key it projects to file's name.
func sourceOf(t *testing.T, d *appsv1.Deployment, file string) fileSource {
	t.Helper()
	pod := d.Spec.Template.Spec
	dir, base := path.Split(file)
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath+"/" != dir {
			continue
		}
		if !m.ReadOnly || m.SubPath != "" {
			t.Errorf("%s: volume %s is mounted writable or with subPath (which the kubelet never updates)", file, m.Name)
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			var items []corev1.KeyToPath
			var src fileSource
			switch {
			case v.Secret != nil:
				items, src = v.Secret.Items, fileSource{kind: "Secret", name: v.Secret.SecretName}
			case v.ConfigMap != nil:
				items, src = v.ConfigMap.Items, fileSource{kind: "ConfigMap", name: v.ConfigMap.Name}
			default:
				t.Fatalf("%s: volume %s is neither a Secret nor a ConfigMap", file, v.Name)
			}
			for _, it := range items {
				if it.Path == base {
					src.key = it.Key
					return src
				}
			}
			t.Fatalf("%s: volume %s has no item %s", file, v.Name, base)
		}
	}
	t.Fatalf("%s is in no mounted volume", file)
	return fileSource{}
}

// TestReplicaRender: the replica's objects, its environment, the files it
// is pointed at and where they come from, its probes and ports, its
// security, and selectors that never mix the replica's pods with the
// bridge's.
func TestReplicaRender(t *testing.T) {
	t.Parallel()
	objs := render(t, replicaSet)

	var got []string
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "replica" {
			got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	slices.Sort(got)
	want(t, "the replica's objects", got, []string{
		"Deployment kubebus/" + replicaName,
		"PodDisruptionBudget kubebus/" + replicaName,
		"Secret kubebus/" + replicaName + "-rules",
		"Secret kubebus/" + replicaName + "-tls",
		"Service kubebus/" + replicaName,
		"ServiceAccount kubebus/" + replicaName,
		"ServiceMonitor kubebus/" + replicaName,
	})

	d := namedDeployment(t, objs, replicaName)
	bridge := namedDeployment(t, objs, replicaSet.fullname)
	want(t, "replicas", *d.Spec.Replicas, int32(2))
	want(t, "the replica's environment", replicaEnv(t, d), map[string]string{
		"REPLICA_BUS":                 "nats",
		"REPLICA_NATS_URL":            "nats://nats.messaging.svc:4222",
		"REPLICA_NATS_STREAM":         "CLUSTERS",
		"REPLICA_NATS_SUBJECT_PREFIX": "fleet",
		"REPLICA_LISTEN":              ":6443",
		"REPLICA_TLS_CERT_FILE":       "/etc/replica/tls/tls.crt",
		"REPLICA_TLS_KEY_FILE":        "/etc/replica/tls/tls.key",
		"REPLICA_CLIENT_CA_FILE":      "/etc/replica/client-ca/ca.crt",
		"REPLICA_TOKEN_FILE":          "/etc/replica/tokens/tokens.csv",
		"REPLICA_RULES_FILE":          "/etc/replica/rules/rules.yaml",
		"REPLICA_METRICS_ADDR":        ":9090",
		"REPLICA_WATCH_QUEUE":         "4096",
		"REPLICA_LOG_LEVEL":           "debug",
		"GOMEMLIMIT":                  "valueFrom",
	})
	// The replica reads what the bridge writes.
	bridgeEnv := map[string]string{}
	for _, e := range bridge.Spec.Template.Spec.Containers[0].Env {
		bridgeEnv[e.Name] = e.Value
	}
	env := replicaEnv(t, d)
	for r, b := range map[string]string{"REPLICA_NATS_URL": "BRIDGE_NATS_URL", "REPLICA_NATS_STREAM": "BRIDGE_NATS_STREAM", "REPLICA_NATS_SUBJECT_PREFIX": "BRIDGE_NATS_SUBJECT_PREFIX"} {
		if env[r] != bridgeEnv[b] {
			t.Errorf("%s=%q, but the bridge's %s=%q", r, env[r], b, bridgeEnv[b])
		}
	}

	ctr := d.Spec.Template.Spec.Containers[0]
	for v, src := range map[string]fileSource{
		"REPLICA_TLS_CERT_FILE":  {"Secret", replicaName + "-tls", "tls.crt"},
		"REPLICA_TLS_KEY_FILE":   {"Secret", replicaName + "-tls", "tls.key"},
		"REPLICA_CLIENT_CA_FILE": {"ConfigMap", "replica-client-ca", "ca.crt"},
		"REPLICA_TOKEN_FILE":     {"Secret", "replica-tokens", "tokens.csv"},
		"REPLICA_RULES_FILE":     {"Secret", replicaName + "-rules", "rules.yaml"},
	} {
		want(t, v+"'s source", sourceOf(t, d, envValue(ctr.Env, v)), src)
	}

	pod := d.Spec.Template.Spec
	want(t, "command", ctr.Command, []string{"/replica"})
	want(t, "image, the bridge's", ctr.Image, bridge.Spec.Template.Spec.Containers[0].Image)
	want(t, "container securityContext, the bridge's", ctr.SecurityContext, bridge.Spec.Template.Spec.Containers[0].SecurityContext)
	want(t, "pod securityContext, the bridge's", pod.SecurityContext, bridge.Spec.Template.Spec.SecurityContext)
	want(t, "serviceAccountName", pod.ServiceAccountName, replicaName)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the replica's pod mounts a ServiceAccount token; it never talks to the API server")
	}
	if sa := named(objs, "ServiceAccount", replicaName); sa == nil || sa.Object["automountServiceAccountToken"] != false {
		t.Error("the replica's ServiceAccount does not turn automountServiceAccountToken off")
	}
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	want(t, "container ports", ports, map[string]int32{"https": 6443, "metrics": 9090})
	for name, probe := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"liveness": {ctr.LivenessProbe, "/healthz"}, "readiness": {ctr.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path || probe.p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %+v, want GET %s on port metrics", name, probe.p, probe.path)
		}
	}

	svc := named(objs, "Service", replicaName)
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var gotPorts []string
	for _, p := range svcPorts {
		m := p.(map[string]any)
		gotPorts = append(gotPorts, fmt.Sprintf("%v %v->%v", m["name"], m["port"], m["targetPort"]))
	}
	want(t, "Service ports", gotPorts, []string{"https 6443->https", "metrics 9090->metrics"})
	// Two replicas name one state with different positions: a client
	// kept on one resumes its watches without a relist.
	if aff, _, _ := unstructured.NestedString(svc.Object, "spec", "sessionAffinity"); aff != "ClientIP" {
		t.Errorf("Service sessionAffinity %q, want ClientIP", aff)
	}

	checkReplicaSelectors(t, objs, d, bridge)
	checkReplicaRules(t, objs)
}

// checkReplicaSelectors: each selector of the replica selects the
// replica's pods (or its Service) and never the bridge's, and the other
// way round.
func checkReplicaSelectors(t *testing.T, objs []*unstructured.Unstructured, replica, bridge *appsv1.Deployment) {
	t.Helper()
	replicaPods, bridgePods := labels.Set(replica.Spec.Template.Labels), labels.Set(bridge.Spec.Template.Labels)
	selects := func(what string, sel map[string]string, mine, other labels.Set) {
		t.Helper()
		s := labels.SelectorFromSet(sel)
		if len(sel) == 0 || !s.Matches(mine) {
			t.Errorf("%s: selector %v does not select %v", what, sel, mine)
		}
		if s.Matches(other) {
			t.Errorf("%s: selector %v also selects %v", what, sel, other)
		}
	}
	selects("replica Deployment", replica.Spec.Selector.MatchLabels, replicaPods, bridgePods)
	selects("bridge Deployment", bridge.Spec.Selector.MatchLabels, bridgePods, replicaPods)
	for _, o := range only(objs, "Service") {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
		if o.GetName() == replicaName {
			selects("replica Service", sel, replicaPods, bridgePods)
		} else {
			selects("Service "+o.GetName(), sel, bridgePods, replicaPods)
		}
	}
	for _, o := range only(objs, "PodDisruptionBudget") {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		if o.GetName() == replicaName {
			selects("replica PodDisruptionBudget", sel, replicaPods, bridgePods)
		} else {
			selects("PodDisruptionBudget "+o.GetName(), sel, bridgePods, replicaPods)
		}
	}
	replicaSvc := labels.Set(named(objs, "Service", replicaName).GetLabels())
	bridgeSvc := labels.Set(named(objs, "Service", replicaSet.fullname+"-metrics").GetLabels())
	for _, o := range only(objs, "ServiceMonitor") {
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		if o.GetName() == replicaName {
			selects("replica ServiceMonitor", sel, replicaSvc, bridgeSvc)
		} else {
			selects("ServiceMonitor "+o.GetName(), sel, bridgeSvc, replicaSvc)
		}
	}
}

// checkReplicaRules: the rules Secret holds an AccessRules file that the
// replica's own parser reads, and that means what the values say.
func checkReplicaRules(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	file := secretData(t, objs, replicaName+"-rules")["rules.yaml"]
	rules, err := replicaaccess.ParseRules(file, "rules.yaml")
	if err != nil {
		t.Fatalf("the chart's rules file does not parse: %v", err)
	}
	ctx := replicaaccess.WithCluster(context.Background(), "prod")
	for _, c := range []struct {
		user     user.Info
		resource string
		allowed  bool
	}{
		{&user.DefaultInfo{Name: "carol", Groups: []string{"sre"}}, "configmaps", true},
		{&user.DefaultInfo{Name: "carol", Groups: []string{"sre"}}, "secrets", false},
		{&user.DefaultInfo{Name: "dave", Groups: []string{"dev"}}, "configmaps", false},
	} {
		d, reason, _ := rules.Authorize(ctx, authorizer.AttributesRecord{
			User: c.user, Verb: "list", Resource: c.resource, APIVersion: "v1", ResourceRequest: true,
		})
		if (d == authorizer.DecisionAllow) != c.allowed {
			t.Errorf("%s list %s on prod: %s, want allowed=%v", c.user.GetName(), c.resource, reason, c.allowed)
		}
	}
}

// secretData decodes the data of the Secret name among objs. It never
// prints the data.
func secretData(t *testing.T, objs []*unstructured.Unstructured, name string) map[string][]byte {
	t.Helper()
	s := named(objs, "Secret", name)
	if s == nil {
		t.Fatalf("no Secret %s rendered", name)
	}
	raw, _, _ := unstructured.NestedStringMap(s.Object, "data")
	out := map[string][]byte{}
	for k, v := range raw {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("Secret %s key %s is not base64", name, k)
		}
		out[k] = b
	}
	return out
}

// TestReplicaBus: the replica reads the bus the bridge writes unless told
// otherwise, each connection value from the bridge's, each replica value
// winning over the bridge's.
func TestReplicaBus(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"REPLICA_TLS_CERT_FILE": "/etc/replica/tls/tls.crt",
		"REPLICA_TLS_KEY_FILE":  "/etc/replica/tls/tls.key",
		"REPLICA_TOKEN_FILE":    "/etc/replica/tokens/tokens.csv",
		"REPLICA_RULES_FILE":    "/etc/replica/rules/rules.yaml",
		"REPLICA_LISTEN":        ":6443",
		"REPLICA_METRICS_ADDR":  ":9090",
		"REPLICA_LOG_LEVEL":     "info",
		"GOMEMLIMIT":            "valueFrom",
	}
	with := func(m map[string]string) map[string]string {
		out := maps.Clone(files)
		maps.Copy(out, m)
		return out
	}
	cases := []struct {
		name string
		args []string
		want map[string]string
	}{
		{"the bridge's kafka", []string{"--set", "sink=kafka", "--set", "kafka.brokers={k1:9092,k2:9092}", "--set", "kafka.topicPrefix=prod"},
			with(map[string]string{"REPLICA_BUS": "kafka", "REPLICA_KAFKA_TLS": "false", "REPLICA_KAFKA_BROKERS": "k1:9092,k2:9092", "REPLICA_KAFKA_TOPIC_PREFIX": "prod"})},
		{"the bridge's kafka, other brokers", []string{"--set", "sink=kafka", "--set", "kafka.brokers={k1:9092}", "--set", "replica.kafka.brokers={mirror:9092}", "--set", "replica.kafka.topicPrefix=fleet"},
			with(map[string]string{"REPLICA_BUS": "kafka", "REPLICA_KAFKA_TLS": "false", "REPLICA_KAFKA_BROKERS": "mirror:9092", "REPLICA_KAFKA_TOPIC_PREFIX": "fleet"})},
		{"the bridge's nats, defaults", []string{"--set", "sink=nats", "--set", "nats.urls={nats://a:4222,nats://b:4222}"},
			with(map[string]string{"REPLICA_BUS": "nats", "REPLICA_NATS_URL": "nats://a:4222,nats://b:4222"})},
		{"the bridge's nats, replica values win", []string{"--set", "sink=nats", "--set", "nats.urls={nats://a:4222}", "--set", "nats.stream=A", "--set", "nats.subject=kube.x",
			"--set", "replica.nats.urls={nats://hub:4222}", "--set", "replica.nats.stream=HUB", "--set", "replica.nats.subjectPrefix=hub", "--set", "replica.nats.subject=hub.y"},
			with(map[string]string{"REPLICA_BUS": "nats", "REPLICA_NATS_URL": "nats://hub:4222", "REPLICA_NATS_STREAM": "HUB", "REPLICA_NATS_SUBJECT_PREFIX": "hub", "REPLICA_NATS_SUBJECT": "hub.y"})},
		{"a bridge on stdout, a replica of another bus", []string{"--set", "replica.bus=nats", "--set", "replica.nats.urls={nats://hub:4222}", "--set", "log.level=warn"},
			with(map[string]string{"REPLICA_BUS": "nats", "REPLICA_NATS_URL": "nats://hub:4222", "REPLICA_LOG_LEVEL": "warn"})},
		{"ports and queue", []string{"--set", "sink=kafka", "--set", "kafka.brokers={k:9092}", "--set", "replica.port=8443", "--set", "replica.metricsPort=8080", "--set", "replica.watchQueue=16"},
			with(map[string]string{"REPLICA_BUS": "kafka", "REPLICA_KAFKA_TLS": "false", "REPLICA_KAFKA_BROKERS": "k:9092", "REPLICA_LISTEN": ":8443", "REPLICA_METRICS_ADDR": ":8080", "REPLICA_WATCH_QUEUE": "16"})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			manifest, err := template(t, "x", "default", append(slices.Clone(replicaAuth), c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeManifest(manifest)
			if err != nil {
				t.Fatal(err)
			}
			d := namedDeployment(t, objs, "x-bridge-replica")
			want(t, "environment", replicaEnv(t, d), c.want)
			// Without a client CA there is no client-ca volume.
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "client-ca" {
					t.Error("a client-ca volume without replica.clientCA")
				}
			}
		})
	}

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		manifest, err := template(t, "x", "default")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(manifest, "REPLICA_") {
			t.Error("the defaults render the replica")
		}
		objs, err := decodeManifest(manifest)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetLabels()["app.kubernetes.io/component"] == "replica" {
				t.Errorf("the defaults render %s %s", o.GetKind(), o.GetName())
			}
		}
	})
}

// TestReplicaRefuses: replica values the replica could not run with are
// refused by the chart, with a message naming them, all at once.
func TestReplicaRefuses(t *testing.T) {
	t.Parallel()
	nats := []string{"--set", "sink=nats", "--set", "nats.urls={nats://nats:4222}"}
	kafka := []string{"--set", "sink=kafka", "--set", "kafka.brokers={k:9092}"}
	args := func(parts ...[]string) []string { return slices.Concat(parts...) }
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no rules", args(nats, []string{"--set", "replica.enabled=true", "--set", "replica.tokens.existingSecret=t"}),
			[]string{"replica.rules.grants or replica.rules.existingSecret is required with replica.enabled"}},
		{"rules twice", args(nats, replicaAuth, []string{"--set", "replica.rules.existingSecret=r"}),
			[]string{"replica.rules: set grants or existingSecret, not both"}},
		{"no authentication", args(nats, []string{"--set", "replica.enabled=true", "--set", "replica.rules.existingSecret=r"}),
			[]string{"replica.clientCA (existingSecret or existingConfigMap) or replica.tokens.existingSecret is required with replica.enabled: nothing is served unauthenticated"}},
		{"client CA twice", args(nats, replicaAuth, []string{"--set", "replica.clientCA.existingSecret=a", "--set", "replica.clientCA.existingConfigMap=b"}),
			[]string{"replica.clientCA: set existingSecret or existingConfigMap, not both"}},
		{"no bus: the bridge's sink is stdout", replicaAuth,
			[]string{"replica.bus must be nats or kafka: the bridge's sink is stdout"}},
		{"nats without servers", args(replicaAuth, []string{"--set", "replica.bus=nats"}),
			[]string{"replica.nats.urls (or the bridge's nats.urls) is required with replica.bus=nats"}},
		{"kafka without brokers", args(replicaAuth, []string{"--set", "replica.bus=kafka"}),
			[]string{"replica.kafka.brokers (or the bridge's kafka.brokers) is required with replica.bus=kafka"}},
		{"nats history layout", args(nats, replicaAuth, []string{"--set", "nats.layout=history"}),
			[]string{"replica.enabled needs the state layout, but nats.layout=history"}},
		{"nats core", args(nats, replicaAuth, []string{"--set", "nats.mode=core", "--set", "checkpoint.type=none"}),
			[]string{"replica.enabled needs JetStream, but nats.mode=core"}},
		{"kafka history layout", args(kafka, replicaAuth, []string{"--set", "kafka.layout=history"}),
			[]string{"replica.enabled needs the state layout, but kafka.layout=history"}},
		{"one kafka topic", args(kafka, replicaAuth, []string{"--set", "kafka.topic=everything"}),
			[]string{"replica.enabled cannot read kafka.topic=everything"}},
		{"DNS names of a certificate brought along", args(nats, replicaAuth, []string{"--set", "replica.tls.existingSecret=c", "--set", "replica.tls.dnsNames={a.example.com}"}),
			[]string{"replica.tls.dnsNames names the generated certificate's extra names, but replica.tls.existingSecret=c brings its own"}},
		{"one port for two servers", args(nats, replicaAuth, []string{"--set", "replica.metricsPort=6443"}),
			[]string{"replica.port and replica.metricsPort are both 6443"}},
		{"every problem at once", []string{"--set", "replica.enabled=true", "--set", "replicaCount=2"},
			[]string{"checkpoint.type=file cannot be used with replicaCount=2", "replica.bus must be nats or kafka", "replica.rules.grants or replica.rules.existingSecret is required", "nothing is served unauthenticated"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", c.args...)
			if err == nil {
				t.Fatalf("%v rendered; want the chart to refuse it", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("want the message to hold %q, got:\n%s", w, err)
				}
			}
		})
	}
}

// TestReplicaSchemaRejects: values.schema.json refuses replica values of
// the wrong form, pointing at them.
func TestReplicaSchemaRejects(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, set, want string }{
		{"bus", "replica.bus=redis", "at '/replica/bus': value must be one of '', 'nats', 'kafka'"},
		{"nats url", "replica.nats.urls={hub:4222}", "at '/replica/nats/urls/0'"},
		{"broker", "replica.kafka.brokers={hub}", "at '/replica/kafka/brokers/0'"},
		{"port", "replica.port=70000", "at '/replica/port'"},
		{"no pods", "replica.replicaCount=0", "at '/replica/replicaCount'"},
		{"watch queue", "replica.watchQueue=0", "at '/replica/watchQueue'"},
		{"log level", "replica.logLevel=trace", "at '/replica/logLevel'"},
		{"dns name", "replica.tls.dnsNames={Not_A_Name}", "at '/replica/tls/dnsNames/0'"},
		{"secret name", "replica.tokens.existingSecret=Tokens", "at '/replica/tokens/existingSecret'"},
		{"misspelled value", "replica.replicas=2", "additional properties 'replicas' not allowed"},
		{"a verb the replica does not serve", `replica.rules.grants[0].subjects[0].kind=User,replica.rules.grants[0].subjects[0].name=a,replica.rules.grants[0].clusters[0]=a,replica.rules.grants[0].rules[0].apiGroups[0]=,replica.rules.grants[0].rules[0].resources[0]=pods,replica.rules.grants[0].rules[0].verbs[0]=delete`,
			"at '/replica/rules/grants/0/rules/0/verbs/0': value must be one of 'get', 'list', 'watch', '*'"},
		{"a subject kind RBAC has but the rules do not", `replica.rules.grants[0].subjects[0].kind=ServiceAccount,replica.rules.grants[0].subjects[0].name=a,replica.rules.grants[0].clusters[0]=a,replica.rules.grants[0].rules[0].apiGroups[0]=,replica.rules.grants[0].rules[0].resources[0]=pods,replica.rules.grants[0].rules[0].verbs[0]=get`,
			"at '/replica/rules/grants/0/subjects/0/kind'"},
		{"a grant without clusters", `replica.rules.grants[0].subjects[0].kind=User,replica.rules.grants[0].subjects[0].name=a,replica.rules.grants[0].rules[0].apiGroups[0]=,replica.rules.grants[0].rules[0].resources[0]=pods,replica.rules.grants[0].rules[0].verbs[0]=get`,
			"at '/replica/rules/grants/0': missing property 'clusters'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", "--set", c.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want the schema to refuse it", c.set)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.want) {
				t.Errorf("--set %s: want a schema error with %q, got:\n%s", c.set, c.want, msg)
			}
		})
	}
}

// TestReplicaCertificate: the generated serving certificate is signed by
// the CA beside it, for the Service's DNS names and the extra ones, for
// server authentication, with its key; the pods carry its checksum, so
// that a new certificate (each render makes one) restarts them. A
// certificate brought along is mounted as it is, and nothing is generated.
func TestReplicaCertificate(t *testing.T) {
	t.Parallel()
	objs := render(t, replicaSet)
	data := secretData(t, objs, replicaName+"-tls")
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(data[k]) == 0 {
			t.Fatalf("the generated Secret has no %s", k)
		}
	}
	if s := named(objs, "Secret", replicaName+"-tls"); s.Object["type"] != "kubernetes.io/tls" {
		t.Errorf("the generated Secret's type is %v, want kubernetes.io/tls", s.Object["type"])
	}
	ca, cert := parseCert(t, "ca.crt", data["ca.crt"]), parseCert(t, "tls.crt", data["tls.crt"])
	if _, err := tls.X509KeyPair(data["tls.crt"], data["tls.key"]); err != nil {
		t.Errorf("tls.key is not tls.crt's key: %v", err)
	}
	wantNames := []string{replicaName, replicaName + ".kubebus", replicaName + ".kubebus.svc", replicaName + ".kubebus.svc.cluster.local", "replica.example.com"}
	want(t, "the certificate's DNS names", cert.DNSNames, wantNames)
	if !ca.IsCA {
		t.Error("ca.crt is not a CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range wantNames {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("a client of %s does not trust the certificate: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "elsewhere.kubebus.svc", Roots: roots}); err == nil {
		t.Error("the certificate is valid for a name it was not made for")
	}
	if days := time.Until(cert.NotAfter).Hours() / 24; days < 364 || days > 366 {
		t.Errorf("the certificate is valid for %.1f more days, want 365 (replica.tls.validityDays)", days)
	}

	d := namedDeployment(t, objs, replicaName)
	sum := sha256.Sum256(append(pemOf(ca), pemOf(cert)...))
	want(t, "the pods' checksum of the certificate", d.Spec.Template.Annotations["checksum/replica-tls"], hex.EncodeToString(sum[:]))
	again := namedDeployment(t, render(t, replicaSet), replicaName)
	if again.Spec.Template.Annotations["checksum/replica-tls"] == d.Spec.Template.Annotations["checksum/replica-tls"] {
		t.Error("two renders give the same certificate: the docs say each upgrade makes a new one")
	}

	t.Run("brought along", func(t *testing.T) {
		t.Parallel()
		objs := render(t, replicaSet, "--set", "replica.tls.existingSecret=replica-serving", "--set-json", "replica.tls.dnsNames=[]")
		if s := named(objs, "Secret", replicaName+"-tls"); s != nil {
			t.Error("a certificate was generated beside replica.tls.existingSecret")
		}
		d := namedDeployment(t, objs, replicaName)
		want(t, "REPLICA_TLS_CERT_FILE's source", sourceOf(t, d, "/etc/replica/tls/tls.crt"), fileSource{"Secret", "replica-serving", "tls.crt"})
		want(t, "REPLICA_TLS_KEY_FILE's source", sourceOf(t, d, "/etc/replica/tls/tls.key"), fileSource{"Secret", "replica-serving", "tls.key"})
		if _, ok := d.Spec.Template.Annotations["checksum/replica-tls"]; ok {
			t.Error("the pods carry a checksum of a certificate the chart did not make")
		}
	})
}

func parseCert(t *testing.T, name string, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("%s is not a PEM certificate", name)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// TestReplicaLint: helm lint --strict passes with the replica's CI values.
func TestReplicaLint(t *testing.T) {
	t.Parallel()
	out, err := runHelm(t, "lint", "--strict", "--kube-version", kubeVersion, chartDir, "-f", replicaSet.file())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Errorf("helm lint did not pass cleanly:\n%s", out)
	}
}
