// Package natskv keeps the checkpoint in a NATS JetStream key-value
// bucket, so that a bridge without a volume, or one started elsewhere,
// finds where the last one stopped.
//
// Layout: one key per object and one per resource, each resource's keys
// under a token of their own, so that loading a resource reads only its
// keys, in one stream of messages (a KV watch), not one request per key:
//
//	<resource>.o.<object key>   JSON Position, {"uid":"…","rv":"12345"}, and "view":"…" when set
//	<resource>.rv               LastResourceVersion, e.g. 12345
//
// <resource> is the resource's name ("deployments.apps") and <object key>
// the object's ("team-a/web"), each escaped to the characters KV keys
// allow: ASCII letters, digits, "-" and "/" are kept, "." becomes "_", and
// every other byte (including "_" and "=") becomes "=XX" in upper-case
// hexadecimal. "deployments.apps" becomes "deployments_apps"; the key of
// Node "ip-10-0-1-5.ec2.internal" becomes "ip-10-0-1-5_ec2_internal".
//
// A key is a subject ($KV.<bucket>.<key>), which must fit in the server's
// 4 KiB control line, while an object's name may be 500 KB. So a token
// longer than 256 bytes once escaped is bounded: its start, "==" (which
// the escaping never writes) and the first 128 bits of the SHA-256 of the
// whole value in hexadecimal, the same every time. The value of a bounded
// object key also holds the object key, {"uid":…,"rv":…,"key":"…"}, which
// is how Load gives it back. Every other key is written as before.
//
// Earlier releases wrote object tokens whole at any length the server
// took (up to about 3,900 bytes). Load reads such a key, and moves it to
// its bounded key: it creates the bounded key if absent (one this release
// wrote since is the later position), then purges the whole key from the
// bucket's stream with a purge request, whose subject filter goes in the
// request's body, never on a control line. Left in place, the entry would
// outlive the object's delete, which purges only the bounded key, and
// every start would publish the delete again. A move that fails is logged
// and tried again at the next Load; the purge needs permission for the
// subject $JS.API.STREAM.PURGE.KV_<bucket>.
//
// Open refuses a bucket that is a mirror, or has sources, naming it: the
// checkpoint is written there, a mirror takes no writes, and entries from
// elsewhere would mix with the bridge's.
//
// Guarantees:
//
//   - Every position in the bucket was acknowledged by the bus: the
//     checkpoint writer hands the store only acknowledged records.
//   - A Commit publishes all its records at once, asynchronously, and
//     waits for every acknowledgement: one round trip per flush, not per
//     record. It returns nil only when the server stored every record.
//   - A Commit is not atomic: NATS has no transaction over several keys,
//     so a Commit that fails may have stored some of its records. That is
//     safe. Each record on its own is a position the sink already
//     delivered, so any mix of old and new positions still never runs
//     ahead of the bus; the writer retries the whole batch on its next
//     flush, and writing the same position twice changes nothing. At worst
//     a restart finds an object at an older position and publishes its
//     current state again, which is the at-least-once the file store has
//     after a crash too.
//   - Records of one Commit are stored in order, because they are
//     published in order on one connection: a later record for a key wins.
//   - A record larger than the server (max_payload) or the bucket takes,
//     which only an object key of that size makes, is left out of its
//     Commit, logged and reported to Options.Dropped; the rest is stored. No event of such an object
//     fits the same server either, so there is no delivered position to
//     keep, and a failing Commit would fail every flush from then on.
//   - Deleting an object purges its key: the bucket keeps one small
//     marker, which expires after an hour when the bucket allows per-message
//     TTLs (buckets the bridge creates do), so deleted objects do not
//     accumulate.
//
// Store does not close the connection it was opened on.
package natskv
