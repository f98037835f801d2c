package e2e

import "github.com/kubebus/bridge/internal/event"

// The bridges these tests run in their own process write over every event
// buffer as it goes back to the pool: a sink that read a message's bytes
// after Publish returned would put garbage on the bus, which the tests'
// reads of the bus find.
func init() { event.Poison(true) }
