// Package rawobject reads a Kubernetes object's JSON exactly as the API
// server sent it, without decoding it into maps: it extracts the few
// fields the bridge needs to identify the object, and cuts
// metadata.managedFields out at the byte level, leaving every other byte
// as it was.
//
// Guarantees:
//
//   - Scan validates the whole input as JSON (RFC 8259), including the
//     parts it skips: structure, string escapes, numbers, literals, and
//     UTF-8 in strings. It accepts exactly what encoding/json's Valid
//     accepts, with two exceptions, both stricter: the top-level value
//     must be an object, and strings must be valid UTF-8 (encoding/json
//     replaces invalid bytes with U+FFFD, which would change the object's
//     bytes on the way; the API server never sends them). Numbers are
//     checked against the JSON grammar, not against float64's range:
//     1e400 is valid JSON and is carried as it is, where decoding it into
//     an interface{} fails. FuzzScan holds Scan to this.
//   - Nesting is bounded at MaxDepth (10,000) levels, as encoding/json
//     bounds it; deeper input is an error. The scan is iterative: it never
//     recurses, whatever the input.
//   - Every error is a *SyntaxError naming what is wrong and the byte
//     offset where it was found. Nothing in this package panics on input.
//   - The fields read are apiVersion and kind at the top level, and
//     metadata's namespace, name, uid, resourceVersion and
//     deletionTimestamp. Keys are matched exactly (case matters, as in
//     the maps of unstructured objects) after decoding their escapes
//     ("met\u0061data" is metadata), and values are decoded as
//     encoding/json decodes them (escapes, surrogate pairs; a lone
//     surrogate becomes U+FFFD). A field whose value is not a string
//     (null, a number, an object) is read as absent, as the unstructured
//     getters read it.
//   - Duplicate keys: the last one wins, as in encoding/json. A second
//     top-level "metadata" replaces the first entirely, so fields of the
//     first that the second lacks are absent.
//   - The cut removes every "managedFields" member of every top-level
//     "metadata" object, with the comma that separated it, wherever it
//     stands (first, middle, last, only member). The rest of the bytes are
//     unchanged, in order: for valid input the result is valid JSON, and
//     decodes to the input's value without metadata.managedFields.
//
// Limits and costs:
//
//   - Scan allocates once, for all the strings it returns together (one
//     string, sliced), and not at all when they are all empty. Only
//     input the API server never sends costs more: a returned value with
//     escapes longer than 256 bytes, or metadata.managedFields present
//     more than once, one allocation each.
//   - The strings share no memory with the input: the input may be
//     reused once Scan returns, and a field kept for long (a uid kept by
//     the source) keeps at most the others' few bytes alive, never the
//     object.
//   - The cut is a copy of the input less its spans: Meta.AppendCut
//     appends the object straight into the caller's buffer (an event's),
//     without allocating; Meta.ManagedFields gives the spans to leave out
//     to a caller that writes the bytes itself, and Meta.CutLen the
//     length of the result, to size a buffer.
package rawobject
