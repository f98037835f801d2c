package pipeline

import (
	"os"
	"testing"

	"github.com/kubebus/bridge/internal/event"
)

// Every test of the package runs with released event buffers poisoned:
// a sink that reads a message after the pipeline released it reads
// garbage, which the tests' checks of what was published find.
func TestMain(m *testing.M) {
	event.Poison(true)
	os.Exit(m.Run())
}
