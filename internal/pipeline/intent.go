package pipeline

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/source"
)

// Intents: before a batch that creates objects is published, the
// checkpoint durably holds an intent (checkpoint.Intent) for each of them,
// so that a restart can tell consumers of a created object that vanished
// around a crash.

// Flusher is implemented by recorders that can make what they were given
// durable on demand, like checkpoint.Writer. With one, the pipeline records
// an intent for every created object, durably, before publishing it: see
// publish.
type Flusher interface {
	Flush(ctx context.Context) error
}

// recordIntents makes the checkpoint know of every object the batch
// creates before the batch is published. A position is recorded only
// after the sink acknowledged it, and checkpoints are flushed on an
// interval; without intents, an object published and then deleted around
// a crash would be in the stream but not in the checkpoint, and the
// restart diff could not tell consumers it is gone. An intent is a
// position with the object's uid and no resourceVersion: on restart, an
// object listed with an intent is published again as added, and one
// missing from the list is published as deleted. It returns ctx's error
// when ctx ended before the intents were durable, or the flush's error
// when no retry can fix it (checkpoint.IsTerminal), which is not retried.
func (p *Pipeline) recordIntents(ctx context.Context, items []item) error {
	f, ok := p.rec.(Flusher)
	if !ok {
		return nil
	}
	var intents []checkpoint.Record
	for _, it := range items {
		if needsIntent(it.delta) {
			intents = append(intents, checkpoint.Record{
				Resource: it.delta.Resource.Name(),
				Key:      it.delta.Key(),
				Position: checkpoint.Position{UID: string(it.delta.UID)},
			})
		}
	}
	if len(intents) == 0 {
		return nil
	}
	p.rec.Record(intents...)
	notify := func(err error, wait time.Duration) {
		p.log.Warn("checkpoint flush before publishing new objects failed; retrying", "err", err, "in", wait.Round(time.Millisecond))
	}
	flush := func() error {
		err := f.Flush(ctx)
		if checkpoint.IsTerminal(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	return backoff.RetryNotify(flush, backoff.WithContext(p.opts.NewBackOff(), ctx), notify)
}

// needsIntent reports whether d may be published only once the checkpoint
// durably holds an intent for its object: see recordIntents.
func needsIntent(d *source.Delta) bool { return d.Type == source.Added }

// abandonCreations abandons the items that need an intent, after the
// flush of intents failed with damaged, an error no retry can fix, and
// returns the rest, to be published. A creation is never published
// without its intent; a delete or an update needs none, and abandoning it
// would lose it for good: the next start refuses the damaged store, and
// after a fresh start the bridge no longer knows what was deleted. The
// bridge stops on the damaged store (the checkpoint writer returns the
// same error); what is published meanwhile cannot be checkpointed.
func (p *Pipeline) abandonCreations(items []item, damaged error) []item {
	var rest []item
	for _, it := range items {
		if !needsIntent(it.delta) {
			rest = append(rest, it)
		}
	}
	if n := len(items) - len(rest); n > 0 {
		p.abandoned.Add(int64(n))
		p.log.Error("the checkpoint store is damaged: creations abandoned unpublished, since their intents cannot be recorded; deletes and updates are published",
			"abandoned", n, "publishing", len(rest), "err", damaged)
	}
	return rest
}
