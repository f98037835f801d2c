// Package cache holds, for one resource of one cluster, the objects the
// bus says are live, a bounded ring of the latest changes, and the
// watchers those changes fan out to. A client-go Reflector fills a Store
// from a consumer ListerWatcher (see Run); the replica's HTTP handlers
// read from it.
//
// # Positions
//
// Every state the Store holds is dated by a bus position, the opaque
// resourceVersion the consumer ListerWatcher sets on the objects it
// hands out (the API server's own resourceVersion is in the annotation
// consumer.AnnotationResourceVersion). The Store compares positions only
// for equality: it knows a position when it is the latest one or one of
// the changes (or bus bookmarks) still in its ring.
//
// # Guarantees
//
//   - A list is one state of the Store: every object at the position the
//     list names, none older.
//   - A watch from a known position receives every change after it, in the
//     bus's order, with no gap and no repeat; a watch from an unknown one
//     fails with ErrExpired, so that a client lists again.
//   - A watcher whose queue fills (it reads slower than changes arrive) is
//     cut: its watch ends and its queue is released; the Store never
//     blocks on a watcher.
//   - Stored objects are never changed once stored: readers share them
//     and must not change them either (DeepCopy first).
//
// # Memory
//
// A Store keeps each live object once (the decoded *unstructured.Unstructured
// of its latest state), plus its ring: RingSize events, each a pointer to
// an object state (an old state stays alive while an event of it is in
// the ring, so the ring costs up to RingSize object states beyond the
// live set) and about 80 bytes. Each watcher adds its queue, up to
// QueueLength events of about 80 bytes (the objects are shared), and for a
// watch that starts with the current state, one pointer per object until
// those events are sent.
//
// The events handed to watchers live carry their object as a Shared,
// which keeps the encodings watchers made of it (at most MaxEncodings,
// each about the size of the encoded object) so that a change is encoded
// once per encoder rather than once per watcher. A Shared lives while a
// watcher's queue holds its event or a watcher is writing it, and the
// ring keeps none: since a watcher more than QueueLength changes behind
// is cut, the encodings alive are those of at most the latest QueueLength
// changes (plus the one each watcher is writing), whatever the number of
// watchers. The events of Initial (a watch of the state, or one that
// resumes from the ring) share no encoding: each watcher encodes them.
package cache
