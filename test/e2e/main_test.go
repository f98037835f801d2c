// Package e2e runs the bridge against a real kube-apiserver and etcd
// started on loopback for the whole package.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/controlplane"
)

var (
	// cp is the control plane every test of the package shares; each test
	// works in namespaces of its own.
	cp *controlplane.ControlPlane
	// bridgeBin is the bridge binary, for tests that run it as a process.
	bridgeBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "bridge-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	bridgeBin = filepath.Join(tmp, "bridge")
	build := exec.Command("go", "build", "-o", bridgeBin, "github.com/kubebus/bridge/cmd/bridge")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build bridge:", err)
		return 1
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err = controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start control plane (run `make controlplane` first):", err)
		return 1
	}
	defer cp.Stop()
	return m.Run()
}
