package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/sink"
)

// pending is one record to write and the message of the batch it belongs
// to. A deleted event becomes two records: the event and its tombstone.
type pending struct {
	msg int
	rec kafkago.Message
}

// chain is the records of one key (in one topic), in the order they must
// reach the log.
type chain struct {
	recs []pending
	// held is set once a message of the key is too large and will be
	// replaced: the key's later messages are not written.
	held bool
	// listed is set once the chain is in the list Publish writes.
	listed bool
}

// Publish writes the records of msgs and returns nil only when every one
// of them was acknowledged. Otherwise it returns a *sink.BatchError with
// one error per message; a delete fails when its event or its tombstone
// failed.
//
// Records are written in rounds: each round writes the next record of
// every key at once, so a key's record is sent only after the one before
// it was acknowledged. When a record fails, the later records of its key
// are not sent (their messages fail too), so that a retry can never put
// them in front of it. A record too large for the producer limit or the
// broker fails its message with sink.TooLarge, and holds back the key's
// later records in the same way: the bridge sends in its place an event
// with only the object's identity (sink.Message.ContentOmitted), then
// the later ones. A delete's tombstone is written with that replacement,
// not with the event that did not fit. When the replacement is too large
// as well, its tombstone is written anyway, so compacted topics forget
// the object, and the key's later records are sent: the pipeline skips
// the replacement and goes on.
func (s *Sink) Publish(ctx context.Context, msgs []*sink.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	errs := make([]error, len(msgs))
	chains := s.chains(msgs, errs)
	for len(chains) > 0 {
		heads := make([]kafkago.Message, len(chains))
		for i, c := range chains {
			heads[i] = c.recs[0].rec
		}
		results := s.write(ctx, heads)
		live := chains[:0]
		for i, c := range chains {
			head, err := c.recs[0], results[i]
			errs[head.msg] = worse(errs[head.msg], err)
			if sink.HoldsKey(msgs[head.msg], err) {
				for _, later := range c.recs[1:] {
					if later.msg == head.msg {
						continue // the message's own tombstone: it failed already
					}
					errs[later.msg] = worse(errs[later.msg], notSent(later.rec.Key, err))
				}
				continue
			}
			if c.recs = c.recs[1:]; len(c.recs) > 0 {
				live = append(live, c)
			}
		}
		chains = live
	}
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return &sink.BatchError{Errors: errs}
	}
	return nil
}

// chains encodes msgs into records grouped by key, in batch order. A
// message that cannot be encoded fails terminally, and one whose event
// is over the size limit with sink.TooLarge; a delete's tombstone is
// still written, so compacted topics forget the object, unless the
// message will be replaced (see Publish): then the key's later messages
// are not written either.
func (s *Sink) chains(msgs []*sink.Message, errs []error) []*chain {
	type chainID struct{ topic, key string }
	byKey := make(map[chainID]*chain, len(msgs))
	var out []*chain
	for i, m := range msgs {
		id := chainID{s.cfg.TopicOf(m.Resource), s.cfg.KeyOf(m)}
		key := []byte(id.key)
		c := byKey[id]
		if c == nil {
			c = &chain{}
			byKey[id] = c
		}
		if c.held {
			errs[i] = notSent(key, sink.TooLarge(errors.New("an earlier message of the key is replaced")))
			continue
		}
		withTombstone := s.cfg.Tombstones && m.Action == actionDeleted
		rec, err := s.encode(m, id.topic, key)
		switch {
		case err != nil:
			errs[i] = sink.Terminal(fmt.Errorf("kafka sink: %w", err))
		case recordSize(&rec) > s.cfg.MaxMessageBytes:
			errs[i] = errTooLarge(recordSize(&rec), s.cfg.MaxMessageBytes)
			if sink.HoldsKey(m, errs[i]) {
				c.held, withTombstone = true, false
			}
		default:
			c.recs = append(c.recs, pending{msg: i, rec: rec})
		}
		if withTombstone {
			c.recs = append(c.recs, pending{msg: i, rec: tombstone(id.topic, key)})
		}
		if len(c.recs) > 0 && !c.listed {
			c.listed = true
			out = append(out, c)
		}
	}
	return out
}

// notSent is the error of a record of key held back because an earlier
// record of the key failed with err. It is retryable, whatever err is:
// the record is sent again after the earlier one (or its replacement).
func notSent(key []byte, err error) error {
	if sink.IsTerminal(err) {
		// Keep the text only: wrapped, err would make this one terminal.
		return fmt.Errorf("kafka sink: not sent after an earlier record of key %q failed (%s): %w", key, err, sink.ErrEarlierFailed)
	}
	return fmt.Errorf("kafka sink: not sent after an earlier record of key %q failed: %w", key, err)
}

// write writes recs, which all have different keys, and returns one error
// per record.
func (s *Sink) write(ctx context.Context, recs []kafkago.Message) []error {
	out := make([]error, len(recs))
	todo := make([]int, len(recs)) // indexes into recs still to write
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		batch := make([]kafkago.Message, len(todo))
		for j, i := range todo {
			batch[j] = recs[i]
			batch[j].WriterData = i
		}
		err := s.w.WriteMessages(ctx, batch...)
		var (
			perRecord kafkago.WriteErrors
			tooLarge  kafkago.MessageTooLargeError
		)
		switch {
		case err == nil:
		case errors.As(err, &perRecord) && len(perRecord) == len(todo):
			for j, e := range perRecord {
				out[todo[j]] = e
			}
		case errors.As(err, &tooLarge):
			// kafka-go refuses the whole call for a record over its batch
			// limit. recordSize checks that limit first, so this is only
			// a safety net: fail that record and write the others.
			if i, ok := tooLarge.Message.WriterData.(int); ok && slices.Contains(todo, i) {
				out[i] = errTooLarge(recordSize(&recs[i]), s.cfg.MaxMessageBytes)
				todo = slices.DeleteFunc(todo, func(k int) bool { return k == i })
				continue
			}
			fallthrough
		default:
			for _, i := range todo {
				out[i] = err
			}
		}
		break
	}
	for i, err := range out {
		switch {
		case err == nil || sink.IsTerminal(err):
		case brokerTooLarge(err):
			out[i] = s.writeAlone(ctx, recs[i])
		default:
			out[i] = fmt.Errorf("kafka sink: write to topic %s: %w", recs[i].Topic, err)
		}
	}
	return out
}

// writeAlone writes rec in a produce request of its own. The broker
// refuses a whole request when it finds the batch too large, so only a
// record refused on its own is known to be too large: that is terminal.
func (s *Sink) writeAlone(ctx context.Context, rec kafkago.Message) error {
	err := s.alone.WriteMessages(ctx, rec)
	var perRecord kafkago.WriteErrors
	if errors.As(err, &perRecord) && len(perRecord) == 1 {
		err = perRecord[0]
	}
	switch {
	case err == nil:
		return nil
	case brokerTooLarge(err):
		return sink.TooLarge(fmt.Errorf("kafka sink: topic %s refused a record of %d bytes as too large (topic max.message.bytes, broker message.max.bytes): %w",
			rec.Topic, recordSize(&rec), err))
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
