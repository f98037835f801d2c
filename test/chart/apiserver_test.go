package chart

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/test/controlplane"
)

// TestAPIServer judges the chart's objects by a real kube-apiserver: the
// chart's table of built-in resources against discovery, every rendered
// object by a server-side dry run, helm install against the server, the
// ServiceAccount's permissions by the RBAC authorizer, and helm install,
// upgrade, rollback and uninstall for real.
func TestAPIServer(t *testing.T) {
	t.Parallel()
	cp := controlplane.ForTest(t)
	c := newCluster(t, cp.RESTConfig())

	t.Run("version", func(t *testing.T) {
		v, err := c.disc.ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != "v"+kubeVersion {
			t.Errorf("the API server is %s, but the tests render for %s: update kubeVersion in test/chart", v.GitVersion, kubeVersion)
		}
	})

	// Before any CRD is installed, so that discovery shows built-ins only.
	t.Run("builtin-resources", func(t *testing.T) { checkBuiltinTable(t, c) })

	namespaces := []string{elsewhere}
	for _, s := range valueSets {
		namespaces = append(namespaces, s.namespace)
		namespaces = append(namespaces, s.values(t).Watch.Namespaces...)
	}
	c.createNamespaces(t, namespaces...)
	c.installServiceMonitorCRD(t)
	c.installPrometheusRuleCRD(t)

	// The helm lifecycle has releases and namespaces of its own, and asks
	// nothing of discovery that the checks below change: it runs beside
	// them, until watch-all.
	lifecycle := make(chan struct{})
	go func() {
		defer close(lifecycle)
		t.Run("helm-lifecycle", func(t *testing.T) { checkLifecycle(t, c, cp.KubeconfigPath()) })
	}()
	defer func() { <-lifecycle }()

	for _, s := range valueSets {
		t.Run("dry-run/"+s.name, func(t *testing.T) { dryRun(t, c, s) })
	}
	for _, s := range valueSets {
		t.Run("helm-install/"+s.name, func(t *testing.T) { helmInstall(t, cp.KubeconfigPath(), s) })
	}
	for _, s := range valueSets {
		t.Run("rbac/"+s.name, func(t *testing.T) { checkRBAC(t, c, s) })
	}
	t.Run("replica", func(t *testing.T) { checkReplica(t, c, cp.KubeconfigPath()) })
	// Last: it installs CRDs, which the questions above would include, and
	// which change the discovery that helm runs on.
	<-lifecycle
	t.Run("watch-all", func(t *testing.T) { checkWatchAll(t, c, cp.KubeconfigPath()) })
}

// elsewhere is a namespace that no value set watches or installs into.
const elsewhere = "elsewhere"

// dryRun creates every rendered object with a server-side dry run and
// strict field validation: defaulting, validation and admission run, and
// nothing is stored. The server must accept every object without a
// warning.
func dryRun(t *testing.T, c *cluster, s valueSet) {
	dryRunObjects(t, c, render(t, s))
}

// dryRunObjects is dryRun for objects rendered otherwise.
func dryRunObjects(t *testing.T, c *cluster, objs []*unstructured.Unstructured) {
	var w warnings
	dyn := c.dryRunClient(t, &w)
	for _, obj := range objs {
		ri, err := c.resourceFor(dyn, obj)
		if err != nil {
			t.Error(err)
			continue
		}
		_, err = ri.Create(t.Context(), obj, metav1.CreateOptions{
			DryRun:          []string{metav1.DryRunAll},
			FieldValidation: metav1.FieldValidationStrict,
			FieldManager:    "chart-test",
		})
		if err != nil {
			t.Errorf("%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	for _, text := range w.list {
		t.Errorf("API server warning: %s", text)
	}
	if len(objs) == 0 {
		t.Error("nothing rendered")
	}
}

// helmInstall runs helm install --dry-run=server against the API server:
// helm checks the chart's kubeVersion against the server's and validates
// the objects with the server's OpenAPI schema, and renders NOTES.txt.
// It returns the NOTES.
func helmInstall(t *testing.T, kubeconfig string, s valueSet) string {
	out, err := runHelm(t, "install", s.release, chartDir, "--namespace", s.namespace,
		"-f", s.file(), "--dry-run=server", "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := strings.Cut(out, "NOTES:\n")
	if !ok {
		t.Fatalf("no NOTES in helm install's output:\n%s", out)
	}
	for _, want := range []string{
		"The bridge " + s.fullname + " is installed in namespace " + s.namespace,
		"kubectl -n " + s.namespace + " rollout status deployment/" + s.fullname,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "<no value>") || strings.Contains(notes, "%!") {
		t.Errorf("NOTES have a rendering error:\n%s", notes)
	}
	return notes
}

// builtinTable is charts/bridge/files/builtin-resources.yaml.
type builtinTable map[string]struct {
	Namespaced []string `json:"namespaced"`
	Cluster    []string `json:"cluster"`
}

// checkBuiltinTable: the chart's table of built-in resources is exactly
// what the API server serves that can be listed and watched, with the same
// scope, and the schema's core resources are the table's.
func checkBuiltinTable(t *testing.T, c *cluster) {
	table := readBuiltinTable(t)

	served := builtinTable{}
	for _, r := range discover(t, c) {
		if !r.watchable {
			continue
		}
		e := served[r.Group]
		if r.namespaced {
			e.Namespaced = append(e.Namespaced, r.Resource)
		} else {
			e.Cluster = append(e.Cluster, r.Resource)
		}
		served[r.Group] = e
	}
	for _, g := range slices.Sorted(maps.Keys(served)) {
		e := served[g]
		slices.Sort(e.Namespaced)
		slices.Sort(e.Cluster)
		served[g] = e
	}
	for _, g := range slices.Sorted(maps.Keys(table)) {
		e := table[g]
		if !slices.IsSorted(e.Namespaced) || !slices.IsSorted(e.Cluster) {
			t.Errorf("builtin-resources.yaml: keep group %q sorted", g)
		}
	}
	if got, want := jsonOf(table), jsonOf(served); got != want {
		t.Errorf("charts/bridge/files/builtin-resources.yaml does not match the API server's watchable resources.\nfile:   %s\nserver: %s", got, want)
	}

	var schema struct {
		Definitions struct {
			Resource struct {
				Then struct {
					Enum []string `json:"enum"`
				} `json:"then"`
			} `json:"resource"`
		} `json:"definitions"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	core := slices.Sorted(slices.Values(append(slices.Clone(table[""].Namespaced), table[""].Cluster...)))
	if !slices.Equal(schema.Definitions.Resource.Then.Enum, core) {
		t.Errorf("values.schema.json accepts these core resources:\n  %v\nbut the table has\n  %v", schema.Definitions.Resource.Then.Enum, core)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
