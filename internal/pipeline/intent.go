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
// so that a restart can tell consumers that a created object vanished
// around a crash.

// IntentRecorder makes intents durable in the checkpoint; a
// checkpoint.Writer is one. Given one in Options.Intents, the pipeline
// publishes a created object only once the checkpoint durably holds an
// intent for it, in the same checkpoint the Recorder records to.
type IntentRecorder interface {
	// RecordIntents returns nil once every intent given is durable, or
	// the error that kept them from being so: ctx's, or the store's, which
	// is final when checkpoint.IsTerminal reports true. The pipeline calls
	// it again, with the same intents, after an error that is not final.
	RecordIntents(ctx context.Context, intents ...checkpoint.Intent) error
}

var _ IntentRecorder = (*checkpoint.Writer)(nil)

// recordIntents makes the checkpoint know of every object the batch
// creates before the batch is published (see checkpoint.Intent for why).
// It returns ctx's error when ctx ended before the intents were durable,
// or the store's error when no retry can fix it (checkpoint.IsTerminal),
// which is not retried. Without Options.Intents it does nothing.
func (p *Pipeline) recordIntents(ctx context.Context, items []item) error {
	if p.opts.Intents == nil {
		return nil
	}
	n := 0
	for _, it := range items {
		if needsIntent(it.delta) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	intents := make([]checkpoint.Intent, 0, n)
	for _, it := range items {
		if needsIntent(it.delta) {
			intents = append(intents, checkpoint.Intent{
				Resource: it.obj.resource(),
				Key:      it.obj.objectKey(),
				UID:      string(it.delta.UID),
			})
		}
	}
	notify := func(err error, wait time.Duration) {
		p.log.Warn("checkpoint flush before publishing new objects failed; retrying", "err", err, "in", wait.Round(time.Millisecond))
	}
	record := func() error {
		err := p.opts.Intents.RecordIntents(ctx, intents...)
		if checkpoint.IsTerminal(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	return backoff.RetryNotify(record, backoff.WithContext(p.opts.NewBackOff(), ctx), notify)
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
		} else {
			it.release() // never sent
		}
	}
	if n := len(items) - len(rest); n > 0 {
		p.abandoned.Add(int64(n))
		p.log.Error("the checkpoint store is damaged: creations abandoned unpublished, since their intents cannot be recorded; deletes and updates are published",
			"abandoned", n, "publishing", len(rest), "err", damaged)
	}
	return rest
}
