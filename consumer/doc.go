// Package consumer gives client-go informers that run from the bus the
// bridge publishes to, with no access to the API server: a ListerWatcher
// for one resource of one cluster, read from a Log (consumer/nats,
// consumer/kafka), for cache.NewSharedIndexInformer with
// &unstructured.Unstructured{} as the example object. Listers, indexers,
// event handlers and resyncs then work as against an API server.
//
// # What an informer gets
//
//   - List reads the whole state the bus holds now (the latest message of
//     every object, in the state layout), and Watch continues from exactly
//     the position the list ended at: no gap, no overlap.
//   - Objects are *unstructured.Unstructured, the object of each event's
//     data. Their metadata.resourceVersion is a bus position, so that a
//     reflector that watches again resumes from it; the API server's
//     resourceVersion is in the annotation AnnotationResourceVersion
//     ("kubebus.io/resource-version"). Do not send these objects back to
//     an API server as they are: an update would conflict.
//   - The bridge's dedupe rules are applied per object key: a state whose
//     uid is the one held and whose API resourceVersion (compared as a
//     number) is not newer is dropped, so repeats the bridge publishes
//     after a crash and older states never reach the handlers; a state
//     older than the held one of another uid is dropped too. A delete of
//     an object the informer does not hold is dropped. An object
//     recreated unseen (a new uid under a held key) is handed out as
//     Deleted (the old one) then Added (the new one); the delete of
//     another uid under a held key whose object lived after the held
//     state (the bus kept only the key's last message), as Deleted of the
//     held one. The latest
//     deletions (8192 keys) are remembered, so a late repeat of a
//     deleted object does not bring it back.
//   - Added or Modified is decided by what the informer holds, not by the
//     bus's "added" or "updated". With a label selector (applied here,
//     not by the bus), an object that stops matching is handed out as
//     Deleted in its new state, one that starts matching as Added.
//   - Records of another cluster or resource (Foreign; a Kafka tombstone
//     is another cluster's when it names one, see Record.Cluster), another
//     namespace, or that cannot be decoded or are not bridge events
//     (Invalid) are counted (Stats, metrics) and logged (the first three
//     of each kind, then one in a thousand), and never stop the informer.
//     A tombstone that names no cluster (written by a bridge before
//     tombstones named theirs) is applied to the key's object, as it was
//     before: right for a bus one cluster writes to. Events the
//     bridge published with only the object's identity (contentomitted)
//     are handed on as they are, counted and logged.
//   - A watch from a position the bus no longer holds (its deletes
//     expired or compacted, the stream or topic recreated) is answered
//     with 410 Gone, counted in Stats.Expired and the
//     kubebus_consumer_expired_total metric, and logged: the reflector
//     lists again. A watch ends cleanly after its TimeoutSeconds, and when
//     the bus cannot be read (after a backoff): the reflector then
//     watches again from its position, without a list.
//
// # When a deleted object's last state is unknown
//
// A delete the bus gives without the object (a Kafka tombstone, a NATS
// delete marker) and the Deleted of an object recreated unseen carry the
// object's last state when the ListerWatcher has a snapshot file; without
// one, they carry only its identity (apiVersion, kind, namespace, name,
// uid) and the annotation AnnotationFinalStateUnknown. Handlers that need
// the last state of every delete should set Options.SnapshotFile.
//
// # Resume
//
// A new informer always lists first. With Options.SnapshotFile (a bbolt
// file), the ListerWatcher keeps on disk the objects the informer holds
// and their position, written at most once a second (and at Close). The
// first list of a new ListerWatcher on that file is served from it and
// the records after its position (Stats.SnapshotLists), with no read of
// the bus's whole state. A file that is damaged is set aside as
// SnapshotFile.damaged; one whose position the bus no longer holds, or
// written for other Options, is discarded: the bus is then listed
// (Stats.BusLists). In one process, nothing is needed: a watch that ends
// is resumed from its position.
//
// # Memory
//
// Per object key a ListerWatcher keeps about 190 bytes beside the
// informer's own cache (the key, a 16-byte uid, the API resourceVersion,
// a hash of the bus key, and the maps' own cost; measured by
// BenchmarkTableMemory), for every object of its namespace, selected or
// not, so that an object leaving the selector cannot come back in an
// older state. It keeps no copy of the objects: the snapshot is on disk.
//
// # Typed objects
//
// The informer must get *unstructured.Unstructured (the reflector checks
// the type before any transform), and a transform converts them: see
// the example of NewListerWatcher, which uses
// runtime.DefaultUnstructuredConverter with cache.SharedInformer's
// SetTransform. Keep the annotation AnnotationResourceVersion when
// converting: it is the API server's resourceVersion.
package consumer
