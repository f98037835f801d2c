// Package source watches Kubernetes resources with shared informers and turns
// every change into a typed Delta.
//
// Guarantees:
//
//   - Every change the API server reports for a watched object becomes
//     exactly one Delta, handed to the Handler from the informer's own
//     goroutine. Deltas of one object reach the Handler in resourceVersion
//     order.
//   - Resyncs (an update whose resourceVersion did not change) produce
//     nothing.
//   - Deletes whose final state the informer missed (client-go's
//     DeletedFinalStateUnknown, after a relist) are unwrapped here and
//     delivered as Deleted with the last state the informer knew, marked
//     Snapshot.
//   - On start, the initial list is compared with the checkpoint: objects
//     whose uid and resourceVersion are unchanged produce nothing; changed
//     ones produce Updated, new ones Added, and checkpointed objects missing
//     from the list produce Deleted carrying their last known identity. All
//     of these are marked Snapshot.
//
// Nothing of client-go's interface{} plumbing leaves this package: the rest
// of the bridge sees only Delta.
package source
