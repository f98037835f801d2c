// Package kafka is a sink that publishes change events to Apache Kafka (or
// any broker that speaks the Kafka protocol), with
// github.com/segmentio/kafka-go.
//
// Guarantees:
//
//   - Delivered means acknowledged. Publish reports a message accepted only
//     when every record it became (the event, and for deletes the
//     tombstone) was written and acknowledged with the configured acks (all
//     in-sync replicas by default). Anything else is an error for that
//     message, indexed to the batch in a *sink.BatchError.
//   - Order per object. Every record of one object carries the object's key
//     and goes to the partition that key hashes to (see [wire.PartitionFor]), so
//     they are read back in the order they were written. Within one Publish,
//     a record is sent only after the previous record of the same key was
//     acknowledged, and once a record of a key fails no later record of that
//     key is sent in that call. A record that failed but reached the log
//     anyway (a timeout after the broker appended it) may therefore appear
//     twice in a row, never after a newer record of its object.
//   - Tombstones name their cluster. Keys name an object within its topic
//     but not its cluster, so a tombstone carries the ce_cluster,
//     ce_source and ce_uid headers of the delete it follows (see
//     wire.Kafka.TombstoneHeaders): where the bridges of several clusters write to one
//     topic, a consumer applies it to the cluster it names alone.
//   - No stall. A message too large for the configured or broker limit is a
//     terminal failure of that message alone (sink.Terminal): the pipeline
//     counts and logs it and carries on.
//   - State, in the state layout (BRIDGE_KAFKA_LAYOUT=state, the default).
//     Topics the sink creates are compacted and never expire records by age
//     (cleanup.policy=compact, retention.ms=-1), and every delete is
//     followed by a tombstone (the configuration refuses to turn them off),
//     so a topic keeps each live object's latest record for as long as the
//     object lives, and a deleted object's records go at compaction, its
//     tombstone delete.retention.ms (BRIDGE_KAFKA_DELETE_RETENTION) later.
//     A topic that exists is never changed: one that is not compacted is
//     logged and reported (see [Options].TopicCompaction).
//   - Cheap health. Health answers from the last produce request while the
//     sink writes, and asks a broker itself at most once per 15 s when it
//     is idle, so readiness probes and /metrics scrapes add no load.
//   - Secrets stay secret. The SASL password is never logged, printed or
//     put in an error.
//
// Config.Parse checks the BRIDGE_KAFKA_* variables once, reporting every
// problem with the variable it names; New takes the Parsed it returns
// and checks nothing again. The connection (brokers, TLS, SASL) is
// package kafkaconn's, which the Kafka checkpoint store shares.
//
// Topics are "<prefix>.<resource>" for the core group and
// "<prefix>.<resource>.<group>" for others, or one topic for everything
// (see [wire.TopicFor]). They are checked, and created if configured to, when the
// sink starts.
package kafka
