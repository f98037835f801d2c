package kafka

// Layout is a topic layout (BRIDGE_KAFKA_LAYOUT).
type Layout string

// Topic layouts.
const (
	// LayoutState creates topics compacted and kept forever
	// (cleanup.policy=compact, retention.ms=-1): each object's latest
	// record lives as long as the object, and a delete's tombstone for
	// delete.retention.ms (BRIDGE_KAFKA_DELETE_RETENTION).
	LayoutState Layout = "state"
	// LayoutHistory creates topics with the broker's defaults (or
	// BRIDGE_KAFKA_TOPIC_CONFIGS): every record, for the retention.
	LayoutHistory Layout = "history"
)
