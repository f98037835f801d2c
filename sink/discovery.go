package sink

import (
	"context"
	"time"

	"github.com/kubebus/bridge/wire"
)

// DiscoveryWriter is implemented by sinks whose bus can hold the
// discovery document of a cluster (wire.Discovery), keeping the latest of
// each cluster: the NATS sink on wire.DiscoverySubject in its stream, the
// Kafka sink on the compacted topic wire.DiscoveryTopic, keyed by
// cluster.
//
// WriteDiscovery returns nil once the bus has acknowledged d, or an
// error; one that no retry can fix is, or wraps, a *TerminalError.
// LastDiscovery returns the latest document of cluster the bus holds, and
// false when it holds none (or cannot tell, in core NATS); the bridge
// writes a document only when it differs from that one, so that a restart
// with nothing changed writes nothing. Both may be called concurrently
// with Publish.
type DiscoveryWriter interface {
	WriteDiscovery(ctx context.Context, d wire.Discovery) error
	LastDiscovery(ctx context.Context, cluster string) (wire.Discovery, bool, error)
}

// DiscoveryRefresher is implemented by DiscoveryWriters whose bus may
// expire a document that does not change (a stream with a maximum age, a
// topic that deletes by time). DiscoveryRefresh is how often the
// document must be written again, changed or not, for the bus to keep it;
// zero when the bus keeps it for good. It is asked after each write, as
// the writer may learn of the bus's retention on its first write.
type DiscoveryRefresher interface {
	DiscoveryRefresh() time.Duration
}
