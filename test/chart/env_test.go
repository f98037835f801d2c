package chart

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/test/tlstest"
)

// environment builds the bridge's environment as the kubelet would: the
// downward API and Secret values resolved, and the projected credential
// files written to a directory standing in for their mount. It fails t on
// a variable the bridge does not know.
func environment(t *testing.T, s valueSet, d *appsv1.Deployment, known map[string]bool) []string {
	t.Helper()
	pod := d.Spec.Template.Spec
	ctr := pod.Containers[0]
	mounts := map[string]string{} // mount path -> stand-in directory
	for _, m := range ctr.VolumeMounts {
		for _, vol := range pod.Volumes {
			if vol.Name != m.Name || vol.Projected == nil {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("credentials volume %s is mounted writable", m.Name)
			}
			dir := t.TempDir()
			for _, src := range vol.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				for _, item := range src.Secret.Items {
					if err := os.WriteFile(filepath.Join(dir, item.Path), fileContent(t, item.Path), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			mounts[m.MountPath] = dir
		}
	}

	var environ []string
	for _, e := range ctr.Env {
		if strings.HasPrefix(e.Name, "BRIDGE_") && !known[e.Name] {
			t.Errorf("the chart sets %s, which the bridge does not know", e.Name)
		}
		val := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				val = s.namespace
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				val = podName
			case f.SecretKeyRef != nil:
				val = "secret:" + f.SecretKeyRef.Key
			case f.ResourceFieldRef != nil && f.ResourceFieldRef.Resource == "limits.memory" && f.ResourceFieldRef.ContainerName == ctr.Name:
				// GOMEMLIMIT, in bytes (test/pod runs it).
				val = strconv.FormatInt(ctr.Resources.Limits.Memory().Value(), 10)
			default:
				t.Fatalf("%s: unexpected valueFrom %+v", e.Name, f)
			}
		}
		if strings.HasSuffix(e.Name, "_FILE") {
			found := false
			for mount, dir := range mounts {
				if rest, ok := strings.CutPrefix(val, mount+"/"); ok {
					val, found = filepath.Join(dir, rest), true
				}
			}
			if !found {
				t.Errorf("%s=%s is not in a mounted Secret", e.Name, val)
			}
		}
		environ = append(environ, e.Name+"="+val)
	}
	return environ
}

// bridgeVariables are the variables bridge --help lists.
func bridgeVariables(t *testing.T) map[string]bool {
	t.Helper()
	var help strings.Builder
	if err := config.Help(&help); err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, line := range strings.Split(help.String(), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			vars[f[0]] = true
		}
	}
	if !vars["BRIDGE_RESOURCES"] {
		t.Fatalf("cannot read the variables from config.Help:\n%s", help.String())
	}
	return vars
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// fileContent stands in for a Secret's file: a PEM certificate or key for
// the TLS files, which the bridge parses at start-up; text otherwise.
func fileContent(t *testing.T, path string) []byte {
	t.Helper()
	if !strings.HasSuffix(path, ".pem") {
		return []byte("stand-in for " + path)
	}
	p := tlstest.NewPKI(t)
	file := p.CAFile
	if strings.HasSuffix(path, "-key.pem") {
		file = p.KeyFile
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
