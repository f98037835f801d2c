// Package kafka reads a resource's records from the Kafka topic the
// bridge writes them to, as a consumer.Log, so that a
// consumer.ListerWatcher, and with it a client-go informer, runs from the
// topic instead of an API server.
//
// # What it guarantees
//
//   - ReadState reads every partition from its log start up to the end
//     offsets it lists when it starts, and returns those offsets as its
//     position; Follow from that position continues with the next record
//     of every partition: no gap, no overlap. Neither waits on a partition
//     whose last offsets hold no record a consumer is given (compacted
//     away, or transaction markers): such a tail is checked with a direct
//     fetch and skipped.
//   - Records come in offset order within a partition. The bridge puts
//     all records of one object in one partition (wire.PartitionFor),
//     so one object's records come in the order the bridge wrote them;
//     records of different partitions interleave in no set order.
//   - A tombstone (a record with no value) is a consumer.Record with the
//     record's key, a nil Message and, as Cluster, the cluster its
//     ce_cluster header names: the object under that key, in that
//     cluster, is gone. A tombstone without the header (written by a
//     bridge before tombstones named their cluster) has an empty Cluster.
//   - Follow passes on a progress record as soon as it has read up to the
//     end offsets listed when it started, then every few seconds while it
//     is at the end of every partition.
//   - A position the topic may no longer hold is answered with an error
//     wrapping consumer.ErrExpired, so the informer lists again: see
//     Log.Follow for when.
//
// # Positions
//
// A position, the resourceVersion an informer sees, is
//
//	k1.<first 16 hex digits of the topic ID>.<unix ms>.<offset of partition 0>.<offset of partition 1>...
//
// The offsets are those of the next records to read. The time is one
// before which no record after those offsets was appended: the Log takes
// it just before it lists end offsets that it then reads up to. In a
// compacted topic a tombstone is kept delete.retention.ms (from the
// cleaning that drops the record it deletes, in Kafka; from the
// tombstone's own timestamp, in kfake), so a position younger than that
// still sees every tombstone after it; the Log calls a position expired
// at 90% of delete.retention.ms, leaving the rest for clock skew. In a
// topic that is not compacted, records go only from the log start, which
// the offsets show.
//
// # Record keys
//
// Record.Key is the Kafka record key as the bridge writes it
// (wire.KeyFor): "namespace/name" (or "name") when each
// resource has a topic of its own, and "<resource>.<group>/namespace/name"
// ("configmaps/default/a", "deployments.apps/default/a") when
// BRIDGE_KAFKA_TOPIC puts every resource in one topic. The Log passes on
// the records of every resource in the topic; the ListerWatcher skips
// those whose Message.Resource is not its own. A tombstone has no
// Message, only its key and its cluster: the ListerWatcher applies it to
// the object whose last record came with the same Record.Key, so a
// tombstone of another resource (another key prefix) never matches an
// object it holds. Keys do not name the cluster: bridges of several
// clusters that write to one topic (the history layout) write the same
// key for objects of the same namespace and name, and the ListerWatcher
// skips the tombstones whose Cluster is another than Options.Cluster, as
// it skips those clusters' events. One with no Cluster is applied to the
// key's object, whatever cluster wrote it, as before tombstones named
// their cluster: right for a topic of one cluster.
//
// # Clients
//
// NewLog takes a *kgo.Client for its connection settings (seed brokers,
// TLS, SASL, dialer) and for metadata, offset and config requests. One
// client may serve any number of Logs and the caller's own use: every
// ReadState and Follow opens a consuming client of its own from the
// client's options (with their consumer options replaced) and closes it
// before it returns, so 50 informers following at once hold 50 consuming
// clients, each with its own connections to the partitions' leaders.
// The caller closes its client after the Logs are done with it. A client
// made with kgo.ConsumeRegex is refused, as its options cannot be
// narrowed to the Log's partitions. Hooks in the client's options
// (kgo.WithHooks) run for the Log's clients too. Metadata requests go
// through the client's cache, so a recreated or repartitioned topic is
// noticed within kgo.MetadataMinAge (5 s by default) and a few seconds.
package kafka
