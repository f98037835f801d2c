package source

import (
	"os"
	"testing"

	"github.com/kubebus/bridge/test/controlplane"
)

// Tests that need a real API server share one control plane
// (controlplane.Shared), each in namespaces of its own; the others never
// start it.
func TestMain(m *testing.M) { os.Exit(controlplane.RunShared(m)) }
