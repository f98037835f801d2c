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
