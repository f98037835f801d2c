package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// Ordered consumer settings.
const (
	// consumerInactive is how long the server keeps a reader's consumer
	// once nothing pulls from it: the consumer of a reader that died
	// without deleting it goes away soon, while a reader that is only
	// disconnected for a while gets a new one from where it was.
	consumerInactive = time.Minute
	// resetAttempts is how often a lost consumer is recreated before the
	// read fails (about 25 s of backoff); the caller reads again.
	resetAttempts = 5
	// deleteTimeout bounds deleting a reader's consumer when it ends.
	deleteTimeout = 5 * time.Second
	// createTimeout bounds the creation of a reader's consumer, and
	// cancelWait how long a caller whose context ended waits for it
	// before it returns.
	createTimeout = 10 * time.Second
	cancelWait    = 2 * time.Second
)

// reader is one ordered consumer of a ReadState or Follow call.
type reader struct {
	l    *Log
	cons jetstream.Consumer
	it   jetstream.MessagesContext
	stop func() bool

	// pos is the position after the last message read.
	pos position
	// lastCons and lastDseq are the consumer that delivered the last
	// message and its delivery sequence (0 before any).
	lastCons string
	lastDseq uint64
	// limit is how old pos may get (maxAge of the grace), 0 for no limit.
	limit time.Duration
	// offset is the server's clock less the local clock.
	offset time.Duration
}

// open starts an ordered consumer of the Log's filter.
func (l *Log) open(ctx context.Context, policy jetstream.DeliverPolicy, startSeq uint64) (*reader, error) {
	// The request that creates the consumer is not cut short when ctx
	// ends: the server may have created a consumer whose answer would no
	// longer be awaited, and no one would delete it. The caller waits for
	// the answer a little (it comes in milliseconds from a server that
	// is up), so that the consumer is gone when the call returns; after
	// that it is deleted once created. (One whose answer never comes
	// within createTimeout is left to the server, which removes it after
	// consumerInactive.)
	type result struct {
		cons jetstream.Consumer
		err  error
	}
	done := make(chan result, 1)
	go func() {
		create, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
		defer cancel()
		cons, err := l.js.OrderedConsumer(create, l.stream, jetstream.OrderedConsumerConfig{
			FilterSubjects:    []string{l.filter},
			DeliverPolicy:     policy,
			OptStartSeq:       startSeq,
			InactiveThreshold: consumerInactive,
			MaxResetAttempts:  resetAttempts,
		})
		done <- result{cons, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		deleteOnce := func(res result) {
			if res.err == nil {
				(&reader{l: l, cons: res.cons}).deleteConsumer()
			}
		}
		wait := time.NewTimer(cancelWait)
		defer wait.Stop()
		select {
		case res := <-done:
			deleteOnce(res)
		case <-wait.C:
			go func() { deleteOnce(<-done) }()
		}
		return nil, ctx.Err()
	}
	if res.err != nil {
		return nil, fmt.Errorf("nats consumer: consumer on stream %s: %w", l.stream, res.err)
	}
	cons := res.cons
	if err := ctx.Err(); err != nil {
		(&reader{l: l, cons: cons}).deleteConsumer()
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(l.batch))
	if err != nil {
		r := &reader{l: l, cons: cons}
		r.deleteConsumer()
		return nil, fmt.Errorf("nats consumer: read stream %s: %w", l.stream, err)
	}
	r := &reader{l: l, cons: cons, it: it}
	if ci := cons.CachedInfo(); ci != nil {
		r.lastCons = ci.Name
	}
	r.stop = context.AfterFunc(ctx, it.Stop)
	return r, nil
}

// close stops the consumer and deletes it from the server.
func (r *reader) close() {
	r.stop()
	r.it.Stop()
	r.deleteConsumer()
}

func (r *reader) deleteConsumer() {
	ci := r.cons.CachedInfo()
	if ci == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := r.l.js.DeleteConsumer(ctx, r.l.stream, ci.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.l.log.Debug("nats consumer: delete the reader's consumer; the server removes it once inactive", "consumer", ci.Name, "err", err)
	}
}

// next returns the next message, or a nil message when none came within
// wait.
func (r *reader) next(ctx context.Context, wait time.Duration) (jetstream.Msg, *jetstream.MsgMetadata, error) {
	msg, err := r.it.Next(jetstream.NextMaxWait(wait))
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if errors.Is(err, nats.ErrTimeout) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("nats consumer: read stream %s: %w", r.l.stream, err)
	}
	md, err := msg.Metadata()
	if err != nil {
		return nil, nil, fmt.Errorf("nats consumer: read stream %s: %w", r.l.stream, err)
	}
	return msg, md, nil
}

// record moves the position past msg and returns msg as a record. A
// marker the server writes when a subject's last message expires (header
// Nats-Marker-Reason) is a record without a message: the object is gone.
func (r *reader) record(msg jetstream.Msg, md *jetstream.MsgMetadata) consumer.Record {
	r.pos.seq = md.Sequence.Stream
	r.pos = r.pos.withTime(md.Timestamp)
	r.lastCons, r.lastDseq = md.Consumer, md.Sequence.Consumer
	rec := consumer.Record{Key: msg.Subject(), Position: r.pos.String()}
	if msg.Headers().Get(jetstream.MarkerReasonHeader) != "" {
		return rec
	}
	m, err := wire.NATS.Decode(msg.Data(), wire.Headers(msg.Headers()))
	if err != nil {
		rec.Err = fmt.Errorf("nats consumer: stream %s sequence %d: %w", r.l.stream, md.Sequence.Stream, err)
		return rec
	}
	rec.Message = m
	return rec
}

// caughtUp asks the server whether every message of the filter has been
// read: the consumer has none pending and has delivered nothing past the
// last message read. If so it returns the server's time of the answer:
// every message of the filter stored before it has been read. A failed
// request is a no.
func (r *reader) caughtUp(ctx context.Context) (time.Time, bool) {
	ci, err := r.cons.Info(ctx)
	if err != nil {
		r.l.log.Debug("nats consumer: consumer info", "err", err)
		return time.Time{}, false
	}
	delivered := uint64(0)
	if ci.Name == r.lastCons {
		delivered = r.lastDseq
	}
	return ci.TimeStamp, ci.NumPending == 0 && ci.Delivered.Consumer == delivered
}

// checkAge returns an error wrapping consumer.ErrExpired when, at the
// server's time now, the position is older than the limit: a message
// after it may have expired before it was read.
func (r *reader) checkAge(now time.Time) error {
	if r.limit <= 0 {
		return nil
	}
	age := time.Duration(now.UnixMilli()-r.pos.ms) * time.Millisecond
	if age <= r.limit {
		return nil
	}
	return fmt.Errorf("nats consumer: stream %s: the reader fell %s behind, more than the delete grace less a tenth (%s): %w",
		r.l.stream, age.Round(time.Millisecond), r.limit, consumer.ErrExpired)
}

// checkStream returns an error wrapping consumer.ErrExpired when the
// stream is gone or is not the one the position was made on. Other errors
// are returned as they are.
func (r *reader) checkStream(ctx context.Context) error {
	_, info, err := r.l.streamInfo(ctx)
	if notFound(err) {
		return fmt.Errorf("%w: %w", err, consumer.ErrExpired)
	}
	if err != nil {
		return err
	}
	if created := info.Created.UnixNano(); created != r.pos.created {
		return fmt.Errorf("nats consumer: stream %s was recreated (created %s): %w",
			r.l.stream, info.Created.UTC().Format(time.RFC3339Nano), consumer.ErrExpired)
	}
	return nil
}
