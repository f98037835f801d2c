package rawobject_test

// The fixtures are made from test/synthetic, which imports package source,
// which imports this package: hence an external test package.

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/test/synthetic"
)

var update = flag.Bool("update", false, "rewrite the fixtures in testdata")

// fixtureObjects are the objects of the fixtures, as the API server sends them, managedFields
// included: a ConfigMap of about 2 KiB and a Pod of about 13 KiB.
var fixtureObjects = []struct {
	name string
	obj  func() runtime.Object
}{
	{"configmap", func() runtime.Object {
		cm := synthetic.ConfigMap(7)
		// A proxy's rules, whose <, > and & the API server escapes.
		cm.Data["routes.conf"] = "location /api/ {\n  proxy_pass http://backend:8080;\n  if ($http_accept !~ \"application/json\") { return 406; }\n}\n" +
			"location = /healthz { access_log off; return 200 \"ok\"; }\n" +
			"map $request_uri $cache { ~*\\.(js|css)$ 1; default 0; }\n" +
			"# rewrite /shop?a=1&b=2 -> /store?a=1&b=2 for clients < v2.0 & > v1.4\n"
		cm.ManagedFields = []metav1.ManagedFieldsEntry{
			managed("helm", metav1.ManagedFieldsOperationUpdate, "",
				`{"f:data":{".":{},"f:CACHE_TTL":{},"f:DATABASE_URL":{},"f:FEATURE_FLAGS":{},"f:HTTP_PORT":{},"f:LOG_LEVEL":{},"f:application.yaml":{}},`+
					`"f:metadata":{"f:annotations":{".":{},"f:meta.helm.sh/release-name":{},"f:meta.helm.sh/release-namespace":{}},`+
					`"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{}}}}`),
			managed("kubectl-edit", metav1.ManagedFieldsOperationUpdate, "", `{"f:data":{"f:LOG_LEVEL":{}}}`),
		}
		return cm
	}},
	{"pod", func() runtime.Object {
		p := synthetic.Pod(7)
		p.ManagedFields = []metav1.ManagedFieldsEntry{
			managed("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "",
				`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/restartedAt":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:generateName":{},`+
					`"f:labels":{".":{},"f:app.kubernetes.io/component":{},"f:app.kubernetes.io/instance":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:app.kubernetes.io/version":{},"f:pod-template-hash":{}},`+
					`"f:ownerReferences":{".":{},"k:{\"uid\":\"0c7d5e2a-0002-4000-8000-000000000002\"}":{}}},`+
					`"f:spec":{"f:affinity":{".":{},"f:podAntiAffinity":{".":{},"f:preferredDuringSchedulingIgnoredDuringExecution":{}}},`+
					`"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:args":{},"f:env":{".":{},"k:{\"name\":\"APP_SETTING_00\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}}},`+
					`"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:initialDelaySeconds":{},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},`+
					`"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},`+
					`"f:securityContext":{".":{},"f:allowPrivilegeEscalation":{},"f:capabilities":{".":{},"f:drop":{}},"f:readOnlyRootFilesystem":{},"f:runAsNonRoot":{}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/app\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}}}}},`+
					`"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:priorityClassName":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{".":{},"f:fsGroup":{},"f:runAsUser":{}},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},`+
					`"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}},"k:{\"name\":\"tmp\"}":{".":{},"f:emptyDir":{},"f:name":{}}}}}`),
			managed("kubelet", metav1.ManagedFieldsOperationUpdate, "status",
				`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},`+
					`"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},`+
					`"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.1.0.7\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`),
		}
		return p
	}},
}

func managed(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(time.Date(2026, 11, 20, 9, 31, 0, 0, time.UTC))
	return metav1.ManagedFieldsEntry{
		Manager: manager, Operation: op, APIVersion: "v1", Time: &t, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(fields), Subresource: subresource,
	}
}

// encodeAsAPIServer writes obj as the API server's JSON serializer does:
// encoding/json's Encoder, HTML escaping on, with the trailing newline.
func encodeAsAPIServer(obj runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	err := json.NewEncoder(&b).Encode(obj)
	return b.Bytes(), err
}

// TestFixtures checks that the fixtures in testdata are what their
// objects encode to; go test -run TestFixtures -update rewrites them.
func TestFixtures(t *testing.T) {
	for _, fx := range fixtureObjects {
		want, err := encodeAsAPIServer(fx.obj())
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(rawobject.FixturePath(fx.name), want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := rawobject.ReadFixture(t, fx.name); !bytes.Equal(got, want) {
			t.Errorf("%s is not what its object encodes to: run go test -run TestFixtures -update", rawobject.FixturePath(fx.name))
		}
	}
}
