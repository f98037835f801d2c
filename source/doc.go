// Package source watches Kubernetes resources with client-go reflectors and
// turns every change into a typed Delta.
//
// Each resource (and namespace, when namespaces are configured) has one
// client-go Reflector, which lists, watches, resumes its watch after a
// dropped connection and lists again when it cannot. Its store keeps no
// objects: the source remembers only each object's uid and resourceVersion,
// so the memory it holds grows with the number of objects watched, not with
// their size. Objects are handed on in deltas and forgotten.
//
// Objects take one of two paths, decided when the source is made (Path):
//
//   - The raw path (PathRaw, with Options.REST) hands on each object's
//     JSON exactly as the API server sent it, in lists and watch events
//     alike (Delta.Raw), managedFields included; only its identity is
//     read, by rawobject's scanner, which validates the whole object and
//     builds no maps. Nothing is decoded, except bookmarks and errors.
//   - The parsed path (PathParsed) decodes every object into an
//     unstructured one (Delta.Object), managedFields dropped unless kept.
//     Options.OldObject needs it, to keep the previous state.
//
// A list streamed as a watch (the default when the API server allows it)
// is handed on as it arrives: the reflector keeps only each object's key
// until the list ends, and the list's end then finds from the keys what is
// gone. The initial list is thus never held whole, in either path. A plain
// list, when the API server refuses to stream one, is gathered whole by
// the reflector before it is handed on, as client-go does.
//
// Guarantees:
//
//   - Every change the API server reports for a watched object becomes
//     exactly one Delta, handed to the Handler from the reflector's own
//     goroutine. Deltas of one object reach the Handler in resourceVersion
//     order.
//   - A watch event or listed object that brings nothing newer (same uid,
//     resourceVersion not newer than the one known, as a list served from
//     a lagging cache can hold) produces nothing: an object never goes
//     back in time.
//   - On start, the initial list is compared with the checkpoint: objects
//     whose uid and resourceVersion are unchanged produce nothing; changed
//     ones produce Updated, new ones Added, and checkpointed objects missing
//     from the list produce Deleted carrying their last known identity. All
//     of these are marked Snapshot.
//   - A list that fails midway and is retried loses and repeats nothing:
//     what the failed attempt handed on and the retry lists unchanged
//     produces nothing; what it handed on and the retry lacks is deleted
//     at the completed list's resourceVersion, unless the retry is older
//     than what it handed on (an API server whose cache lags served it):
//     the watch that follows the list then brings that object's changes.
//   - When a watch cannot resume and the reflector lists again (a relist),
//     that list is compared with what is known the same way: only what
//     changed in the gap produces deltas, marked Snapshot, deletes
//     included. Relists are counted and logged.
//   - A resource is watched at the version it was resolved to. When a
//     list or watch is answered NotFound, discovery is asked where the
//     resource is served now. Served at another version only, in three
//     checks in a row, Run stops with a NotServedError naming the
//     resource and both versions; served at no version, it stops after 5
//     minutes unless the resource comes back. Deltas the watch delivered
//     before (the deletes of a CRD's objects) are handed over before Run
//     returns. It never keeps listing a version that is gone.
//   - A list or watch the API server throttles (429 Too Many Requests, from
//     API Priority and Fairness) is retried, never given up on: by
//     client-go after its Retry-After, then by the reflector, or by Check,
//     with backoff. Each answer 429 is told to a ThrottleObserver and
//     logged, at most once a minute per resource.
//
// A Set watches what a Selection selects: resources named, as kubectl
// names them, and patterns ("*", "*.<group>") minus exclusions, one Source
// per resource, each with the guarantees above. Its guarantees:
//
//   - A pattern selects every resource the API server serves that supports
//     list and watch, one version per group-resource, the preferred one (as
//     discovery.ServerPreferredResources chooses it); never secrets, which
//     only a name selects; never what the exclusions name. A resource named
//     is watched even when excluded. Subresources are skipped silently;
//     resources without list or watch are skipped and logged once each.
//   - At most ListConcurrency resources are between the start of their
//     Source and its initial list's end at once. Synced closes once every
//     resource selected at start has synced, or, for one only a pattern
//     selects, its initial list kept failing for longer than the stall
//     timeout: that resource is then stopped, gives up its place, and is
//     retried later, as below.
//   - With a pattern, the Set follows the cluster: informers on
//     CustomResourceDefinitions and APIServices make it select again, from
//     discovery, after each change (and again while discovery has not yet
//     caught up with the CRDs, for up to a minute). A resource newly
//     selected is prepared (SetOptions.Prepare), checked and watched: its
//     objects are handed on as Added, Snapshot. A resource no longer served
//     has its Source stopped; every object that Source still knows is then
//     handed on as Deleted, so no position of it is left behind, and
//     nothing of it is kept. A resource served at another preferred version
//     is watched there, under the same name. A group whose discovery fails
//     keeps what is watched of it.
//   - A resource selected by a pattern that cannot be read (forbidden, not
//     found, unavailable, its conversion webhook failing, throttled) is left
//     out with a warning, once, and tried again at each selection and with
//     a backoff of its own (from a second to five minutes), so that a brief
//     fault delays it by seconds. So is one whose Source fails while it
//     runs; one no longer served at its version while watched is selected
//     again. None of these ends the Set: only a selector the API server
//     rejects does. A resource named fails Check, and Run, as a Source
//     alone does.
//
// Nothing of client-go's interface{} plumbing leaves this package: the rest
// of the bridge sees only Delta.
package source
