package wire

// Defaults of the bridge's NATS configuration, which consumers read with
// when they are not told otherwise.
const (
	// DefaultStream is the default of BRIDGE_NATS_STREAM.
	DefaultStream = "KUBE"
	// DefaultSubjectPrefix is the default of BRIDGE_NATS_SUBJECT_PREFIX:
	// it says what the subjects carry and is short to type in filters.
	DefaultSubjectPrefix = "kube"
	// DefaultStateSubject is the default of BRIDGE_NATS_SUBJECT in the
	// state layout. It leaves out {version}: a resource keeps its subjects
	// when the bridge moves to another of its versions, so no object is
	// left behind under an old version's subject.
	DefaultStateSubject = "{prefix}.{cluster}.{group}.{resource}.{namespace}.{name}"
)

// Stream metadata the bridge writes on the streams it creates, for
// consumers to find the layout and the delete grace period.
const (
	// MetadataLayout holds the stream's layout: "state" or "history".
	MetadataLayout = "kubebus.io/layout"
	// MetadataDeleteTTL holds, in the state layout, how long a delete
	// stays in the stream before it expires, as a Go duration ("24h0m0s").
	MetadataDeleteTTL = "kubebus.io/delete-ttl"
)
