// Package kafkastore keeps the bridge's checkpoint in a compacted Kafka
// topic (BRIDGE_CHECKPOINT=kafka:<topic>), the way Kafka Connect keeps the
// offsets of its source connectors.
//
// Layout. The topic has one record per object and one per resource; the
// newest record of a key wins, so compaction (cleanup.policy=compact)
// keeps the topic's size proportional to the number of objects:
//
//	key "<resource>/<namespace>/<name>"   value {"uid":"…","rv":"12345"}, and "view":"…" when set
//	key "<resource>/<name>"               (cluster-scoped objects)
//	key "<resource>"                      value {"lastResourceVersion":"12345"}
//
// <resource> is the version-independent resource name, "configmaps" or
// "deployments.apps"; it never holds a '/', so the first '/' of a key ends
// it and a key without one is a resource's own record. A deleted object's
// key gets a tombstone (a null value), so compaction forgets it.
//
// Guarantees:
//
//   - Open reads every partition of the topic from its start up to the end
//     offsets it found when it began, so Load sees every Commit that
//     returned before Open was called. Load is served from memory.
//   - Commit writes all its records in one batched write, acknowledged by
//     every in-sync replica (acks=all), and returns only after that. Only
//     then does Load see them.
//   - A Commit that fails may have written some of its records: Kafka has
//     no multi-record atomicity without transactions. That is harmless,
//     since every record is an acknowledged position on its own; the
//     checkpoint Writer keeps the records pending and commits them again.
//   - A record larger than BRIDGE_KAFKA_MAX_MESSAGE_BYTES, which only an
//     object key of that size makes, is left out of its Commit, logged
//     and reported to Options.Dropped; the rest is written. No event of
//     such an object fits the sink's limit either, so there is no
//     delivered position to keep, and a failing Commit would fail every
//     flush from then on.
//   - LastResourceVersion only grows where resourceVersions compare
//     (resourceversion.Compare: decimals the API server writes), as in
//     checkpoint.File.
package kafkastore
