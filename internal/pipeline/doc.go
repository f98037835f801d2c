// Package pipeline carries deltas from the source to a sink and records
// them in the checkpoint once the sink has accepted them.
//
// Guarantees:
//
//   - OnDelta never blocks on the network: deltas wait in memory, grouped by
//     object. It waits only for room: while the deltas not done (waiting or
//     in flight) weigh Options.MaxPendingBytes, their objects' JSON counted,
//     it holds the source back until the sink has accepted enough of them.
//     A source faster than the sink (a first sync of a large cluster) thus
//     takes no more memory than a slow one. Each wait is counted
//     (Stats.Held, Stats.HeldFor). StopHolding, when the source stops,
//     lets every waiting delta in; Run's stop abandons them.
//   - Deltas of one object reach the sink in the order they arrived, one
//     batch at a time; deltas of different objects are published in
//     parallel by several workers.
//   - A delta is recorded in the checkpoint only after the sink accepted it.
//   - Failures the sink calls retryable are retried with exponential,
//     jittered, capped backoff, for as long as the pipeline runs. When one
//     of an object's deltas fails, it and every later delta of that object
//     in the batch are sent again, so order holds even across retries.
//   - A change whose event is larger than the bus takes (sink.ErrTooLarge)
//     is published all the same, in its place in the object's order, as
//     the same event with only the object's identity as data, marked
//     ContentOmitted; it is logged, counted (Stats.Omitted) and
//     checkpointed once accepted like any other. A delete is therefore
//     always delivered.
//   - Any other terminal failure, and a change whose identity-only event
//     is too large as well, is logged with the object's identity (a name
//     past 128 bytes abbreviated, see bounded.Abbrev), counted, and
//     skipped; it never stalls the stream.
//   - With Options.Intents (the checkpoint writer), a created object is
//     published only once the checkpoint durably holds an intent
//     (checkpoint.Intent) for it. When that fails with an error no retry
//     can fix (the store is damaged, checkpoint.IsTerminal), the creations
//     of the batch are abandoned and counted (Stats.Abandoned), and its
//     deletes and updates, which need no intent, are published all the
//     same: on a damaged store abandoned means lost, since the next start
//     refuses the store.
//   - Memory is bounded by MaxPendingBytes, and by the number of objects
//     with deltas waiting, not by the number of changes: when more than
//     MaxPendingPerObject deltas of one object wait (the sink is slow or
//     down), consecutive deltas of the same object are collapsed into one
//     that carries the latest state, and the collapsed ones give their
//     room back.
//   - Batches are encoded while the workers wait for the sink, so encoding
//     does not add to the wait: at most Workers batches are in the sink and
//     at most Workers more wait encoded for a free worker.
//   - With an encoder that lends buffers (LeaseEncoder, as event.Encoder
//     does), each event is written into a buffer of the encoder's pool and
//     given back once, when its message is accepted, skipped, replaced by
//     its event without content, or abandoned, never while a sink may
//     still read it (sinks keep nothing of it once Publish returned, see
//     sink.Sink): events make no garbage. The buffers of a Publish cut
//     short by the end of the context are left to the garbage collector.
package pipeline
