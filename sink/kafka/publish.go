package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

// Publish writes the records of msgs and returns nil only when every one
// of them was acknowledged. Otherwise it returns a *sink.BatchError with
// one error per message; a delete fails when its event or its tombstone
// failed.
//
// Order is kept by sink.PublishInOrder: a round writes at most one message
// of each object, and an object's next message goes only in a later round,
// after the one before it was acknowledged. Its objects (group-resource and
// key) map one to one onto this sink's record keys (topic and KeyOf), so
// two records of one key are never in flight together. When a record fails, the later
// messages of its object are not sent (they fail with
// sink.ErrEarlierFailed), so that a retry can never put them in front of
// it. A record too large for the producer limit or the broker fails its
// message with sink.TooLarge, and holds back the object's later messages
// in the same way: the bridge sends in its place an event with only the
// object's identity (wire.Message.ContentOmitted), then the later ones. A
// delete's tombstone follows its event within the round (see round), and
// is written with the replacement, not with an event that did not fit.
// When the replacement is too large as well, its tombstone is written
// anyway, so compacted topics forget the object, and the later messages
// are sent: the pipeline skips the replacement and goes on.
func (s *Sink) Publish(ctx context.Context, msgs []*wire.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	return sink.PublishInOrder(ctx, msgs, s.round)
}

// round writes msgs, no two of which are about the same object, and
// returns one error per message. It writes every event at once, then the
// tombstones of the deletes among them, so that a tombstone reaches the
// log after its event. A message that cannot be encoded fails terminally,
// and one whose event is over the size limit with sink.TooLarge. A delete
// gets no tombstone while its event fails in a way that holds its object
// (sink.HoldsKey): the bridge sends the event, or its replacement, again,
// and the tombstone with it. Once ctx has ended, no tombstone is sent, and the
// deletes fail, to be sent again.
func (s *Sink) round(ctx context.Context, msgs []*wire.Message) []error {
	errs := make([]error, len(msgs))
	events, eventOf := s.events(msgs, errs)
	for j, err := range s.write(ctx, events) {
		errs[eventOf[j]] = err
	}

	var tombstones []kafkago.Message
	var tombstoneOf []int
	for i, m := range msgs {
		if s.cfg.Tombstones && m.Action == wire.ActionDeleted && !sink.HoldsKey(m, errs[i]) {
			tombstones = append(tombstones, tombstone(s.cfg.TopicOf(m.Resource), []byte(s.cfg.KeyOf(m)), m))
			tombstoneOf = append(tombstoneOf, i)
		}
	}
	if err := ctx.Err(); err != nil && len(tombstones) > 0 {
		// A tombstone sent now could land while its delete is reported
		// failed; the delete is sent again, with its tombstone.
		for _, i := range tombstoneOf {
			errs[i] = worse(errs[i], fmt.Errorf("kafka sink: tombstone not sent: %w", context.Cause(ctx)))
		}
		return errs
	}
	for j, err := range s.write(ctx, tombstones) {
		errs[tombstoneOf[j]] = worse(errs[tombstoneOf[j]], err)
	}
	return errs
}

// events encodes the event records of msgs, with eventOf the message of
// each, and sets the error of each message that cannot have one.
func (s *Sink) events(msgs []*wire.Message, errs []error) (events []kafkago.Message, eventOf []int) {
	events = make([]kafkago.Message, 0, len(msgs))
	eventOf = make([]int, 0, len(msgs))
	for i, m := range msgs {
		rec, err := s.encode(m, s.cfg.TopicOf(m.Resource), []byte(s.cfg.KeyOf(m)))
		switch {
		case err != nil:
			errs[i] = sink.Terminal(fmt.Errorf("kafka sink: %w", err))
		case recordSize(&rec) > s.cfg.MaxMessageBytes:
			errs[i] = errTooLarge(recordSize(&rec), s.cfg.MaxMessageBytes)
		default:
			events = append(events, rec)
			eventOf = append(eventOf, i)
		}
	}
	return events, eventOf
}

// write writes recs, which all have different keys, and returns one error
// per record. A record whose write failed in a way that may pass is sent
// again, up to writeAttempts times in all. A request the broker refused
// for its size is sent again record by record (writeAlone), to tell which
// record is too large; once ctx ends, no more records go alone.
func (s *Sink) write(ctx context.Context, recs []kafkago.Message) []error {
	out := s.attempts(ctx, recs, s.p.produce)
	for i, err := range out {
		switch {
		case err == nil || sink.IsTerminal(err):
		case brokerTooLarge(err) && ctx.Err() != nil:
			out[i] = fmt.Errorf("kafka sink: write to topic %s: not sent again alone: %w", recs[i].Topic, context.Cause(ctx))
		case brokerTooLarge(err):
			out[i] = s.writeAlone(ctx, &recs[i])
		default:
			out[i] = fmt.Errorf("kafka sink: write to topic %s: %w", recs[i].Topic, err)
		}
	}
	return out
}

// attempts writes recs with send, and sends again those that failed in a
// way that may pass (retryable), after a backoff, until writeAttempts.
// It returns one error per record, each its last attempt's.
func (s *Sink) attempts(ctx context.Context, recs []kafkago.Message, send func(context.Context, []*kafkago.Message) []error) []error {
	out := make([]error, len(recs))
	todo := make([]*kafkago.Message, len(recs))
	at := make([]int, len(recs)) // the index in recs of each of todo
	for i := range recs {
		todo[i], at[i] = &recs[i], i
	}
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(writeBackoffMin), backoff.WithMaxInterval(writeBackoffMax), backoff.WithMaxElapsedTime(0))
	for attempt := 1; ; attempt++ {
		errs := send(ctx, todo)
		s.wrote(ctx, errs)
		var again int
		for j, err := range errs {
			out[at[j]] = err
			if err != nil && retryable(err) {
				todo[again], at[again] = todo[j], at[j]
				again++
			}
		}
		if again == 0 || attempt == writeAttempts || ctx.Err() != nil {
			return out
		}
		todo, at = todo[:again], at[:again]
		wait := bo.NextBackOff()
		s.log.Warn("kafka sink: write failed, sending again", "records", again, "attempt", attempt, "in", wait, "err", out[at[0]])
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return out
		}
	}
}

// writeAlone writes rec in a produce request of its own. The broker
// refuses a whole request when it finds the batch too large, so only a
// record refused on its own is known to be too large: that is terminal.
func (s *Sink) writeAlone(ctx context.Context, rec *kafkago.Message) error {
	err := s.attempts(ctx, []kafkago.Message{*rec}, s.p.produceAlone)[0]
	switch {
	case err == nil || sink.IsTerminal(err):
		return err
	case brokerTooLarge(err):
		return sink.TooLarge(fmt.Errorf("kafka sink: topic %s refused a record of %d bytes as too large (topic max.message.bytes, broker message.max.bytes): %w",
			rec.Topic, recordSize(rec), err))
	default:
		return fmt.Errorf("kafka sink: write to topic %s: %w", rec.Topic, err)
	}
}

// brokerTooLarge reports whether the broker refused a produce request for
// its size.
func brokerTooLarge(err error) bool {
	return errors.Is(err, kafkago.MessageSizeTooLarge) || errors.Is(err, kafkago.RecordListTooLarge)
}

// worse keeps the error that matters more for a message: a retryable one
// over a terminal one (so the message is retried), and the first over a
// later one.
func worse(cur, next error) error {
	switch {
	case cur == nil:
		return next
	case next == nil:
		return cur
	case sink.IsTerminal(cur) && !sink.IsTerminal(next):
		return next
	}
	return cur
}
