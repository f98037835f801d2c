package source

import (
	"fmt"
	"os"
	"testing"

	"github.com/kubebus/bridge/test/controlplane"
)

// Tests that need a real API server share one control plane
// (controlplane.Shared), each in namespaces of its own; the others never
// start it.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := controlplane.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "source: stop control plane:", err)
	}
	os.Exit(code)
}
