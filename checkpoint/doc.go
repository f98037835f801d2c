// Package checkpoint remembers how far the bridge has published each
// Kubernetes resource, so that a restarted bridge can tell which objects
// changed, appeared or vanished while it was down instead of republishing
// everything.
//
// For every resource (such as "configmaps" or "deployments.apps") a
// checkpoint holds each object's UID and last published resourceVersion
// (and, when the bridge publishes a view of the cluster, the object's state
// in that view, [Position.View]), keyed by "namespace/name" (or "name" for
// cluster-scoped objects), plus the highest resourceVersion published for
// the resource as a whole.
//
// The pipeline hands a [Record] to a [Writer] only after the message bus has
// acknowledged the delta. The Writer keeps the newest record per object in
// memory and commits them to a [Store] on an interval and on shutdown. On
// start the bridge calls [Store.Load] for each resource and diffs the
// informer's initial list against the [Snapshot].
//
// Guarantees:
//
//   - The checkpoint never runs ahead of the bus: only acknowledged deltas
//     are recorded, so every position in a Store has been delivered. The
//     one exception says so itself: an [Intent] (a position for which
//     [Position.IsIntent] reports true) is recorded, durably, before an
//     object's creation is published, and means only that it may have been.
//   - A flush is atomic: a Store applies all records of one Commit, or none.
//     Records that fail to commit stay pending in the Writer and are retried
//     on the next flush; a newer record for the same object still wins.
//   - Crash-safe: [OpenFile] returns a Store that fsyncs every Commit, so a
//     crash or power loss leaves the last successful Commit intact and never
//     a partial one.
//   - A damaged checkpoint is never used and never silent: [OpenFile]
//     reads and checks the whole file before it returns (bbolt's
//     consistency check, every page within the file, every position
//     decodes), and fails with [ErrEmpty] or [ErrCorrupt], naming the file
//     and saying what to do. Neither it nor the File's methods panic on
//     what the file holds; bbolt's panics and memory faults become errors.
//     The file is only ever created whole, so an empty file was emptied by
//     something else. [SetAside] keeps an unreadable file under another
//     name for a fresh start. The other stores fail Load with an error
//     naming the key of a value that is not a position.
//   - Damage found at run time is final: a Commit error for which
//     [IsTerminal] reports true is never retried. The Writer's Run returns
//     it at once, so the bridge stops rather than wait on a flush that
//     cannot succeed; the next OpenFile refuses the file.
//   - Every object key has one entry, under one bbolt key: keys past
//     1 KiB are stored under a bounded key (see fileKey). Keys an earlier
//     release stored whole (1,025 bytes to 32 KiB) are moved to their
//     bounded key by [OpenFile], in one transaction after the check, so
//     that an object's delete removes its only entry.
//   - What a crash loses is the records acknowledged since the last
//     successful flush (at most one flush interval's worth). After a restart
//     those objects look changed and are published again: delivery is
//     at-least-once, with possible duplicates but no gaps.
package checkpoint
