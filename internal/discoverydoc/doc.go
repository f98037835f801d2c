// Package discoverydoc publishes the discovery document of the bridge's
// cluster (wire.Discovery): the resources the bridge watches, as the
// cluster's discovery describes them, with each CRD's
// additionalPrinterColumns, so that a program serving the cluster's state
// from the bus (the replica) can answer discovery and print tables.
//
// Guarantees:
//
//   - A Publisher writes a document once the resources watched are known
//     (when Run starts), and again after each change of them, or of what
//     the document takes of a CRD, that changes the document; a document
//     equal to the one the bus holds (all but its Time) is not written
//     again, so a restart with nothing changed writes nothing.
//   - A change is built Settle after the last change, and never later than
//     MaxDelay after the first change not yet built, however steadily
//     changes come.
//   - Where the bus may expire a document that does not change
//     (sink.DiscoveryRefresher: a NATS stream with a maximum age, a Kafka
//     topic that deletes by time), the document is written again, changed
//     or not, as often as the bus says.
//   - A Publisher reads the bus again once, a while after its first read
//     (longer than a write of the bridge may take): a write of the
//     previous leader that landed after the first read is seen then, and
//     replaced by the document of this leader's if they differ.
//   - It never blocks the objects' pipeline: it runs on a goroutine of its
//     own, and builds and writes one document at a time.
//   - A failed write is retried with the bridge's backoff (package
//     retry), each time with the newest document, built afresh: after an
//     outage of the bus it is the newest document that the bus gets, and no
//     older one after it. A write that no retry can fix (sink.IsTerminal)
//     is logged and tried again at the next change.
//   - A CRD's columns, and its singular name, short names and categories,
//     come from the CustomResourceDefinition, read with an informer, whose
//     changes build the document again (discovery shows them a moment
//     later); those of built-in resources come from discovery. When the
//     bridge may not list CRDs, their names come from discovery too, the
//     documents carry no columns, and that is logged once, at start.
//   - A resource whose group-version discovery cannot read for now is
//     described with what the bridge knows of it (group, version,
//     resource, kind, scope), and the document is built again, with
//     backoff, until discovery answers.
//
// Only the leader runs a Publisher: the bridge runs one within its Run,
// which runs only while it holds the lease.
package discoverydoc
