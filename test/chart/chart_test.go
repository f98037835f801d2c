// Package chart tests the Helm chart in charts/bridge with a real helm and,
// where objects must be judged by Kubernetes, a real kube-apiserver.
//
// What the tests establish:
//   - helm lint --strict passes, with and without each CI value set;
//   - values.schema.json and the chart's own checks refuse bad values with a
//     message that names them;
//   - the environment the chart gives the bridge is accepted by the
//     bridge's own configuration loader and means what the values say;
//   - every rendered object of the four CI value sets is accepted by the
//     API server (server-side dry run, strict field validation, no
//     warnings; the ServiceMonitor and the PrometheusRule by CRDs of the
//     fields the chart uses);
//   - the Grafana dashboard and the PrometheusRule are rendered only when
//     turned on; every query of the alerts and of the dashboard parses
//     with Prometheus' PromQL parser and names only metrics the bridge
//     exports (the consumer's alerts: metrics the consumer package
//     exports);
//   - the bridge's ServiceAccount may get, list and watch exactly the
//     configured resources, in exactly the configured namespaces, plus its
//     leader-election Lease, and nothing else;
//   - with watch.all, its token lists and watches every resource discovery
//     shows that can be listed and watched, minus the exclusions and
//     secrets, in the built-in API groups and the extra ones (a CRD), and
//     is forbidden secrets unless they are named, the excluded built-in
//     resources, and the resources of groups it was not given;
//   - helm install, upgrade and rollback, run for real, leave exactly what
//     the revision renders, and the ServiceAccount's token may then read
//     exactly what that revision grants; helm uninstall leaves no object
//     of any kind the chart can render, and no release record, except the
//     checkpoint's claim when its annotation asks helm to keep it.
//
// helm is taken from $BRIDGE_TEST_BIN_DIR, else <repository>/.bin; `make
// helm` builds it there. A missing helm fails the tests, never skips them.
package chart

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubebus/bridge/test/helmtest"
)

// kubeVersion is the Kubernetes version helm renders for: the version of
// the kube-apiserver that test/tools builds (K8S_VERSION in the Makefile).
// TestAPIServer checks that they agree.
const kubeVersion = "1.37.1"

// chartDir is the chart under test, relative to this package.
const chartDir = "../../charts/bridge"

// valueSet is one of the CI value sets in charts/bridge/ci, installed as
// release in namespace.
type valueSet struct {
	name      string
	release   string
	namespace string
	// fullname is what the chart should name the release's objects.
	fullname string
}

func (s valueSet) file() string {
	return filepath.Join(chartDir, "ci", s.name+"-values.yaml")
}

// valueSets are the four value sets of the acceptance criteria. Each has
// namespaces of its own, so that they can share one API server.
var valueSets = []valueSet{
	{name: "all-namespaces", release: "cdc", namespace: "cdc-system", fullname: "cdc-bridge"},
	{name: "two-namespaces", release: "teams", namespace: "bridge", fullname: "teams-bridge"},
	{name: "nats-kv-ha", release: "ha", namespace: "messaging", fullname: "ha-bridge"},
	{name: "kafka-sasl", release: "payments-cdc", namespace: "payments", fullname: "payments-cdc-bridge"},
}

// setValues is what a value set configures, as far as the tests need it.
type setValues struct {
	ReplicaCount *int `json:"replicaCount"`
	Watch        struct {
		Resources        []string `json:"resources"`
		ClusterResources []string `json:"clusterResources"`
		Namespaces       []string `json:"namespaces"`
	} `json:"watch"`
	LeaderElection struct {
		Enabled *bool `json:"enabled"`
	} `json:"leaderElection"`
	Sink       string `json:"sink"`
	Checkpoint struct {
		Type string `json:"type"`
	} `json:"checkpoint"`
	ExistingSecret string `json:"existingSecret"`
}

// readYAML reads the YAML file at path into a T.
func readYAML[T any](t *testing.T, path string) T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// values reads the value set's file.
func (s valueSet) values(t *testing.T) setValues {
	t.Helper()
	v := readYAML[setValues](t, s.file())
	if v.Watch.Resources == nil {
		t.Fatalf("%s: the tests need watch.resources set explicitly", s.file())
	}
	return v
}

// leaderElection is whether the chart should turn leader election on.
func (v setValues) leaderElection() bool {
	if v.LeaderElection.Enabled != nil {
		return *v.LeaderElection.Enabled
	}
	return v.ReplicaCount != nil && *v.ReplicaCount > 1
}

// runHelm runs helm with args in a home of its own, and returns its
// standard output, or an error holding its standard error.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return helmtest.Run(t.Context(), t, args...)
}

// template runs helm template for release in namespace with args (-f,
// --set), and returns the manifest, or an error holding helm's message.
func template(t testing.TB, release, namespace string, args ...string) (string, error) {
	t.Helper()
	return runHelm(t, append([]string{"template", release, chartDir,
		"--namespace", namespace, "--kube-version", kubeVersion}, args...)...)
}

// render renders a value set, with more args if given, into its objects.
func render(t testing.TB, s valueSet, args ...string) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := template(t, s.release, s.namespace, append([]string{"-f", s.file()}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		t.Fatalf("%s: %v\n%s", s.name, err, manifest)
	}
	return objs
}

// decodeManifest splits a multi-document manifest into objects.
func decodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// only returns the objects of kind.
func only(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// deployment returns the one Deployment among objs.
func deployment(t testing.TB, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	ds := only(objs, "Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(ds))
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(ds[0].Object, &d, true); err != nil {
		t.Fatalf("Deployment: %v", err)
	}
	return &d
}
