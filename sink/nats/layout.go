package nats

// Layout is a stream layout (BRIDGE_NATS_LAYOUT).
type Layout string

// Stream layouts.
const (
	// LayoutState keeps each object's latest message for as long as the
	// object lives (one message per subject, no age limit); a delete is
	// kept for BRIDGE_NATS_DELETE_TTL, then expires. A consumer that starts
	// at any time reads the whole state from the stream.
	LayoutState Layout = "state"
	// LayoutHistory keeps every message for BRIDGE_NATS_STREAM_MAX_AGE.
	LayoutHistory Layout = "history"
)

// DefaultStateSubject is the default of BRIDGE_NATS_SUBJECT in the state
// layout. It leaves out {version}: a resource keeps its subjects when the
// bridge moves to another of its versions, so no object is left behind
// under an old version's subject.
const DefaultStateSubject = "{prefix}.{cluster}.{group}.{resource}.{namespace}.{name}"

// Stream metadata the bridge writes on the streams it creates, for
// consumers to find the layout and the delete grace period.
const (
	// MetadataLayout holds the stream's layout: LayoutState or
	// LayoutHistory.
	MetadataLayout = "kubebus.io/layout"
	// MetadataDeleteTTL holds, in the state layout, how long a delete
	// stays in the stream before it expires, as a Go duration ("24h0m0s").
	MetadataDeleteTTL = "kubebus.io/delete-ttl"
)
