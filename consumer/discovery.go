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

// DiscoverySynced is implemented by a DiscoveryLog that tells when it has
// read the bus to its end once: a reader that serves from the documents
// knows from it that what it holds is the bus's discovery, and not only
// the part read so far.
type DiscoverySynced interface {
	// Synced is closed once a Follow call has passed to its fn every
	// document the bus held when the call began reading, or found that it
	// held none. While the bus cannot be read (no stream or topic yet,
	// the server unreachable), it stays open.
	Synced() <-chan struct{}
}
