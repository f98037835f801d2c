// Package wire is the bridge's message format: what every message on the
// bus is, and how each bus carries it. The bridge's sinks write through
// it and its consumers read through it; a program that reads the bus
// needs it and its bus's client, and nothing of the bridge's sinks.
//
// It holds:
//
//   - Message, a change to one Kubernetes object as a CloudEvents 1.0
//     event, and how its id, source, type and subject are derived from
//     the object (Derive);
//   - the one table of its attributes (Attributes), which drives the
//     structured JSON (Message.MarshalJSON, Message.UnmarshalJSON) and
//     each bus's headers in binary mode (Binding: NATS, Kafka);
//   - NATS subjects: the template (SubjectTemplate), the escaping of
//     values into bounded tokens (EscapeToken), filters, and the
//     defaults (DefaultStream, DefaultSubjectPrefix, DefaultStateSubject);
//   - Kafka topics (TopicFor), record keys (KeyFor) and the partition of
//     a key (PartitionFor), and their default (DefaultTopicPrefix).
//
// Guarantees:
//
//   - The same change always gets the same id; different changes get
//     different ids (ID).
//   - What MarshalJSON writes, UnmarshalJSON reads back equal; what a
//     binding's sink writes in either mode, Binding.Decode reads back
//     equal, but for View and Encoded, which are no attributes. Every
//     attribute of the table is in both modes on both buses.
//   - The structured form is byte for byte what encoding/json writes of
//     it with HTML escaping off, attributes in the table's order.
//   - A subject is at most MaxSubjectLen bytes whatever the names, and
//     the token of a value is always the same (EscapeToken).
//   - The partition of a key is the Java client's: any Kafka client that
//     keeps its default partitioner finds an object's records in one
//     partition.
//
// docs/message-format.md describes the format for readers in any
// language.
package wire
