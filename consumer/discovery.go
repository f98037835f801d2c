package consumer

import (
	"context"

	"github.com/kubebus/bridge/wire"
)

// DiscoveryLog reads the discovery documents the bridges publish on a bus
// (wire.Discovery): the latest one of each cluster.
type DiscoveryLog interface {
	// Follow passes to fn the latest document of every cluster the bus
	// holds, then each new document as it arrives, until ctx ends (it then
	// returns ctx.Err()) or fn returns an error (returned as it is). A
	// document that cannot be decoded is skipped, counted and logged, and
	// never stops it.
	Follow(ctx context.Context, fn func(wire.Discovery) error) error
}
