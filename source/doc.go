// Package source watches Kubernetes resources with client-go reflectors and
// turns every change into a typed Delta.
//
// Each resource (and namespace, when namespaces are configured) has one
// client-go Reflector, which lists, watches, resumes its watch after a
// dropped connection and lists again when it cannot. Its store keeps no
// objects: the source remembers only each object's uid and resourceVersion,
// so the memory it holds grows with the number of objects watched, not with
// their size. Objects are handed on in deltas and forgotten.
//
// Guarantees:
//
//   - Every change the API server reports for a watched object becomes
//     exactly one Delta, handed to the Handler from the reflector's own
//     goroutine. Deltas of one object reach the Handler in resourceVersion
//     order.
//   - A watch event or listed object that brings nothing newer (same uid,
//     resourceVersion not newer than the one known, as a list served from
//     a lagging cache can hold) produces nothing: an object never goes
//     back in time.
//   - On start, the initial list is compared with the checkpoint: objects
//     whose uid and resourceVersion are unchanged produce nothing; changed
//     ones produce Updated, new ones Added, and checkpointed objects missing
//     from the list produce Deleted carrying their last known identity. All
//     of these are marked Snapshot.
//   - When a watch cannot resume and the reflector lists again (a relist),
//     that list is compared with what is known the same way: only what
//     changed in the gap produces deltas, marked Snapshot, deletes
//     included. Relists are counted and logged.
//   - A resource is watched at the version it was resolved to. When a
//     list or watch is answered NotFound, discovery is asked where the
//     resource is served now. Served at another version only, in three
//     checks in a row, Run stops with a NotServedError naming the
//     resource and both versions; served at no version, it stops after 5
//     minutes unless the resource comes back. Deltas the watch delivered
//     before (the deletes of a CRD's objects) are handed over before Run
//     returns. It never keeps listing a version that is gone.
//
// Nothing of client-go's interface{} plumbing leaves this package: the rest
// of the bridge sees only Delta.
package source
