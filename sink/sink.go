// Package sink defines how the bridge hands change events to a message bus.
//
// A Sink receives a batch of messages and returns only when every message in
// it is durably accepted by the bus, or with an error that says which
// messages failed and whether retrying them can help. The bridge records a
// message in its checkpoint only after Publish reported it accepted, so a
// Sink that returns nil early breaks the bridge's no-loss guarantee.
//
// Within one batch, messages with the same resource and key are in the
// order they must be delivered; a Sink must not reorder them, and when one
// of them fails it must not have accepted a later one (the bridge sends the
// failed message and everything after it again, and an accepted later
// message would then be followed by an older one). PublishInOrder keeps
// this for sinks that publish asynchronously. Messages with different keys
// may be delivered in any order.
//
// The bytes of the messages (wire.Message's Encoded and Data) are lent to
// Publish, not given: once Publish returns, accepted or not, the bridge
// reuses them for later events. A Sink must not keep any reference to
// them, nor to slices of them, after Publish returns, and must not return
// while the client of its bus may still read them (to send them later, or
// again); what must outlive the call is copied. The one leeway: when
// Publish returns because its context ended, the bridge does not reuse
// the bytes of that call (it is stopping, and a client cut short may still
// hold them), but leaves them to the garbage collector.
// sinktest.KeepsNoBytes checks a Sink against its bus.
package sink

import (
	"context"

	"github.com/kubebus/bridge/wire"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Sink publishes batches of messages to a message bus.
//
// Publish is called by several goroutines at once, each with its own batch;
// implementations must be safe for concurrent use. It may read the
// messages' bytes until it returns, and not after (see the package doc). Publish returns nil when
// every message was accepted. Otherwise it returns an error: a *BatchError
// to report failures message by message, or any other error to fail the
// whole batch. Failures are retried unless they are, or wrap, a
// *TerminalError.
//
// Close releases the sink's connections. It is called once, after the last
// Publish has returned. It returns by the time ctx ends at the latest: a
// bus connection that has not closed cleanly by then is dropped, and the
// error says so. Nothing is lost that way, as every message Publish
// reported accepted had been acknowledged.
type Sink interface {
	Publish(ctx context.Context, msgs []*wire.Message) error
	Close(ctx context.Context) error
}

// HealthChecker is implemented by sinks that know whether they can reach
// their bus. Health returns nil while they can, and says why not
// otherwise. It must be cheap and safe to call at any time.
type HealthChecker interface {
	Health() error
}

// Preparer is implemented by sinks that must make room for a resource's
// messages before the first of them comes, such as a topic of its own.
// The bridge calls Prepare for each resource it starts watching while it
// runs, before any message of it; Prepare returns nil once the sink takes
// the resource's messages, or says why it cannot (the resource is then
// not watched). It may be called concurrently with Publish.
type Preparer interface {
	Prepare(ctx context.Context, resource schema.GroupVersionResource) error
}

// Held is what a bus holds of one object: the identity and
// resourceVersion of its latest message there.
type Held struct {
	Namespace, Name string
	UID             string
	ResourceVersion string
	// Deleted is true when the latest message says the object is gone (a
	// delete, or a tombstone).
	Deleted bool
	// Kind and APIVersion are the object's, when the bus tells them
	// without reading every message whole; ReadState tells them of at
	// least one object of each call, when it holds any.
	Kind, APIVersion string
	// View is the Message.View the latest message was published with.
	View string
}

// StateReader is implemented by sinks whose bus can keep each object's
// latest message for as long as the object lives (a state layout), and
// read back what it holds: the bridge compares that with the cluster and
// repairs what differs.
type StateReader interface {
	// HoldsState reports whether the sink writes a state layout; when it
	// does not, ReadState is not called.
	HoldsState() bool
	// ReadState calls fn once for each object of resource (of cluster,
	// where the bus tells clusters apart) in namespaces (every namespace
	// when it is empty) that the bus holds a message of, with what its
	// latest message says. It returns fn's first error.
	ReadState(ctx context.Context, cluster string, resource schema.GroupVersionResource, namespaces []string, fn func(Held) error) error
}

// Witness is implemented by sinks whose bus can tell whether it holds any
// message of a cluster's resources. In the history layout, where the
// checkpoint is the only record of what was published, the bridge
// refuses to take an empty checkpoint for a first start when the bus
// holds messages: the checkpoint was lost.
type Witness interface {
	// HoldsAny reports whether the bus holds a message of any of
	// resources, of cluster where the bus tells clusters apart, and of
	// namespaces (every namespace when it is empty; cluster-scoped
	// resources are not limited by it) where the bus tells them apart
	// cheaply; false when it cannot tell.
	HoldsAny(ctx context.Context, cluster string, resources []schema.GroupVersionResource, namespaces []string) (bool, error)
}
