// Package rawobject reads a Kubernetes object's JSON exactly as the API
// server sent it, without decoding it into maps: it extracts the few
// fields the bridge needs to identify the object, and cuts
// metadata.managedFields out at the byte level, leaving every other byte
// as it was. For a view (a filter and a projection), it decodes only
// the members a filter reads (Extract), and keeps or drops members at
// the byte level (Meta.Project), with a hash of what is kept that leaves
// out what changes on every write (Meta.Hash).
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
//     escapes longer than 256 bytes, one allocation each, or
//     metadata.managedFields or metadata.resourceVersion present more
//     than once, a few.
//   - The strings share no memory with the input: the input may be
//     reused once Scan returns, and a field kept for long (a uid kept by
//     the source) keeps at most the others' few bytes alive, never the
//     object.
//   - The cut is a copy of the input less its spans: Meta.AppendCut
//     appends the object straight into the caller's buffer (an event's),
//     without allocating; Meta.ManagedFields gives the spans to leave out
//     to a caller that writes the bytes itself, and Meta.CutLen the
//     length of the result, to size a buffer.
//   - Scan also notes where metadata.resourceVersion lies, so that
//     Meta.Hash hashes the object's pieces as they lie, without a second
//     pass over its structure; and where the object's own members lie
//     (up to 8, with keys without escapes: apiVersion, kind, metadata,
//     spec, status), so that Meta.Extract and Meta.Project go straight to
//     the members their paths name. This costs Scan nothing measurable
//     and no allocation; it makes a Meta 352 bytes (256 without).
//
// Views:
//
//   - Field paths (ParsePaths) are written as CEL selects fields:
//     spec.template.spec, metadata.labels["app.kubernetes.io/name"],
//     spec.containers[*].image. A name step enters objects only, [*]
//     lists only. Errors are *PathError, with the byte offset.
//     Path.IsIdentity tells the paths a projection cannot drop.
//   - Extract and Meta.Project take input that Scan accepted: what they
//     pass over whole they skim, counting brackets without validating.
//     Meta.Extract and Meta.Project do not even skim the object's
//     members off their paths: they copy them (or leave them out) whole,
//     from where Scan found them, and walk only inside the members
//     their paths enter (and not in metadata.managedFields, which Scan
//     found too). Their cost is that of those members, not the
//     object's: dropping status from a 13 KiB Pod, or reading its
//     status.phase, costs about a microsecond. What they return is what
//     the walk over the whole object returns (Extract; Meta.Project of a
//     Meta without members), byte for byte: FuzzExtract and FuzzProject
//     hold them to it. An object whose members Scan did not note (more
//     than 8, or a key with escapes) is walked.
//     On other input what they return is unspecified (often an error;
//     Project then returns dst unchanged), but they never panic or loop.
//     FuzzExtract and FuzzProject hold them to that, and, on valid input,
//     to a reference that applies the same rules to the maps
//     encoding/json decodes.
//   - Extract decodes what lies on the paths as the unstructured decoder
//     does (int64 for integers, float64 for other numbers), nothing
//     else, and never metadata.managedFields.
//   - Meta.Project leaves members out with their commas, as the cut
//     does, and copies every other byte: for the compact JSON the API
//     server sends, the projection is the input less the members left
//     out. The identity members (apiVersion, kind, metadata's name,
//     namespace, uid, resourceVersion, deletionTimestamp) are always
//     kept. It allocates nothing when its buffer has room, and once
//     when it has not.
//   - The hash (Project's, and Meta.Hash, Project's for the zero
//     Projection) is the xxhash64 of the projection as written, without
//     its metadata.resourceVersion member: states of an object that
//     differ only in their resourceVersion, or in what the projection
//     leaves out (managedFields, a dropped status), hash the same; any
//     other difference in the bytes kept changes it, but for collisions
//     of a 64-bit hash. The hash is of bytes: the same value written
//     with other whitespace, key order or escapes hashes differently.
package rawobject
