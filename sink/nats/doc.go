// Package nats is a sink that publishes each change to NATS, as a
// CloudEvents message on a subject made from the object's identity, and
// the connection the nats-kv checkpoint shares.
//
// Guarantees, by mode (BRIDGE_NATS_MODE):
//
//   - JetStream (the default) is at least once. Publish returns nil for a
//     message only after the stream's PubAck for it arrived, so the bridge
//     checkpoints only what the stream has stored. Every message carries
//     Nats-Msg-Id, the event id, and the stream drops a message whose id it
//     stored within its duplicate window: the repeats a crash causes (what
//     was acknowledged after the last checkpoint flush) are dropped when
//     the bridge is back within the window.
//   - Core NATS is at most once. Publish returns once the server has
//     received the batch (a flush round trip), but the server keeps
//     nothing: subscribers that are not connected, or too slow, miss
//     messages.
//
// In both modes messages of one batch go out in order on one connection,
// which the server processes in order, so changes of one object are
// stored in order. A failure that affects the connection fails the rest
// of the batch unsent, so that a later change of an object is never
// stored when an earlier one was not.
//
// Layouts (BRIDGE_NATS_LAYOUT), in JetStream mode:
//
//   - State (the default): the stream keeps one message per subject, the
//     latest, with no age or size limit, so it holds every live object's
//     latest change for as long as the object lives. A delete carries the
//     Nats-TTL header of BRIDGE_NATS_DELETE_TTL: it replaces the object's
//     state and expires after the TTL. Each subject names exactly one
//     object for its whole life: wire.ParseSubjectTemplate's layout must hold {group},
//     {resource}, {namespace} and {name}, and must not hold {action} or
//     {version} (Config.Parse refuses it).
//   - History: the stream keeps every message for
//     BRIDGE_NATS_STREAM_MAX_AGE.
//
// The sink never changes an existing stream. It reads it, and New fails,
// naming BRIDGE_NATS_LAYOUT and each setting that differs, when it does
// not fit the layout (checkLayout); it creates the stream only when it is
// missing.
//
// Subjects follow BRIDGE_NATS_SUBJECT, by default
// <prefix>.<cluster>.<group>.<resource>.<namespace>.<name> in the state
// layout and <prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>
// in the history layout. Each
// value is escaped with wire.EscapeToken, so no name can add a token or a
// wildcard; wire.UnescapeToken reverses it. No name can make a subject pass the
// server's limits either: a value longer than wire.MaxTokenLen once escaped (a
// ClusterRole's name may be 500 KB) gets a bounded token, its start and a
// hash of the whole value, the same every time, which wire.EscapeToken also
// gives consumers for their filters. Every subject is at most
// wire.MaxSubjectLen bytes, well inside the server's 4 KiB control line, so no
// message can make the server close the connection the sink and the
// nats-kv checkpoint share; wire.ParseSubjectTemplate refuses a prefix or fixed words
// that leave no room, and a subject past the limit is never sent (a
// terminal failure of that message alone). In binary mode an event whose
// attributes would pass a stream's 64 KiB of headers is sent in structured
// mode. docs/nats.md describes the layout, the escaping, the stream
// settings and both content modes.
//
// Config.Parse checks the BRIDGE_NATS_* variables once, reporting every
// problem with the variable it names, and reads the TLS files; New and
// Connect take the Parsed it returns and check nothing again. The TLS
// and credentials files are read again at every connect, so that a
// certificate or credentials renewed on disk are taken up at the next
// reconnect.
//
// The connection reconnects forever, with exponential backoff, once it has
// been established; New fails if no server can be reached at start-up.
// Passwords, tokens and credentials in URLs are never logged or returned
// in errors: the password and token are envvar.Secrets, and a Config or
// Parsed prints and logs its URLs without credentials.
package nats
