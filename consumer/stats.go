package consumer

import "sync/atomic"

// Stats counts what a ListerWatcher did since it was made.
type Stats struct {
	// BusLists counts lists read from the bus's state; SnapshotLists,
	// lists served from the snapshot file and the records after it (a
	// resume without a list of the bus).
	BusLists, SnapshotLists uint64
	// Expired counts watches answered with 410 Gone: the bus no longer
	// held their position, or it was not the one last handed out.
	Expired uint64
	// Events counts the watch events handed to the informer, bookmarks
	// included.
	Events uint64
	// Records dropped, by reason: repeats and older states (Duplicates);
	// undecodable or not bridge events (Invalid); another cluster or
	// resource (Foreign; Kafka tombstones that name another cluster
	// included); delete events of objects not held (UnknownDeletes;
	// the tombstone that follows each delete on Kafka is not counted);
	// another namespace than Options.Namespace (OtherNamespace).
	Duplicates, Invalid, Foreign, UnknownDeletes, OtherNamespace uint64
	// ContentOmitted counts events that carried only their object's
	// identity (the bridge's contentomitted); they are handed on as such.
	ContentOmitted uint64
	// SnapshotErrors counts failed reads and writes of the snapshot file.
	SnapshotErrors uint64
	// Held is the number of objects the informer holds, as of the last
	// event handed out.
	Held uint64
}

// counters are the live counts behind Stats.
type counters struct {
	busLists, snapshotLists, expired, events              atomic.Uint64
	duplicates, invalid, foreign, unknownDeletes, otherNS atomic.Uint64
	contentOmitted, snapshotErrors, held                  atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{
		BusLists: c.busLists.Load(), SnapshotLists: c.snapshotLists.Load(),
		Expired: c.expired.Load(), Events: c.events.Load(),
		Duplicates: c.duplicates.Load(), Invalid: c.invalid.Load(), Foreign: c.foreign.Load(),
		UnknownDeletes: c.unknownDeletes.Load(), OtherNamespace: c.otherNS.Load(),
		ContentOmitted: c.contentOmitted.Load(), SnapshotErrors: c.snapshotErrors.Load(),
		Held: c.held.Load(),
	}
}

// dropped returns the counter of a drop reason.
func (c *counters) dropped(r dropReason) *atomic.Uint64 {
	switch r {
	case dropDuplicate:
		return &c.duplicates
	case dropInvalid:
		return &c.invalid
	case dropForeign:
		return &c.foreign
	case dropUnknownDelete:
		return &c.unknownDeletes
	default:
		return &c.otherNS
	}
}
