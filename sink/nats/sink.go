package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

// Sink publishes messages to NATS. It is safe for concurrent use: Publish
// may be called by several goroutines at once, and Health at any time.
type Sink struct {
	cfg    *Parsed
	log    *slog.Logger
	tmpl   *wire.SubjectTemplate
	nc     *nats.Conn
	closed <-chan struct{}
	js     jetstream.JetStream // nil in core mode
	// pubOpts are the options of every JetStream publish, made once.
	pubOpts []jetstream.PublishOpt
	// expectStream is the Nats-Expected-Stream header of every message,
	// the stream's name, in JetStream mode; empty (no header) in core
	// mode.
	expectStream string
	// deleteTTL is the Nats-TTL header of deletes: BRIDGE_NATS_DELETE_TTL
	// in the state layout of JetStream mode, else empty (no header).
	deleteTTL string
	// discoveryErr is WriteDiscovery's error when the stream does not
	// capture the discovery subject; nil when it does, or in core mode.
	discoveryErr error
	// streamMaxAge is the stream's MaxAge, as the server has it: the age
	// at which it expires a discovery document that does not change.
	streamMaxAge time.Duration

	closeOnce sync.Once
	closeErr  error
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// New connects to NATS and, in JetStream mode, checks that the stream
// exists, fits the layout (BRIDGE_NATS_LAYOUT) and captures the bridge's
// subjects, creating it when it is missing and
// BRIDGE_NATS_CREATE_STREAM=true. It never changes an existing stream. It
// fails if no server can be reached, if the stream is missing and may not
// be created, or if it does not fit the layout. cfg is what Config.Parse
// returned; New checks none of it again.
func New(ctx context.Context, cfg *Parsed, log *slog.Logger) (*Sink, error) {
	if cfg == nil || cfg.tmpl == nil {
		return nil, errors.New("nats sink: settings not made by Config.Parse")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tmpl := cfg.tmpl
	nc, closed, err := connect(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, log: log, tmpl: tmpl, nc: nc, closed: closed}
	if cfg.Mode == ModeJetStream && cfg.Layout == LayoutState {
		s.deleteTTL = cfg.DeleteTTL.String()
		if cfg.StreamMaxAge != defaultStreamMaxAge {
			log.Warn("nats sink: BRIDGE_NATS_STREAM_MAX_AGE is ignored in the state layout, whose stream keeps live objects for as long as they live",
				"maxAge", cfg.StreamMaxAge)
		}
	}
	if cfg.Mode == ModeCore {
		log.Info("nats sink: core NATS, at most once: messages reach only subscribers connected at the time", "subject", tmpl.String())
		return s, nil
	}
	// encode sets Nats-Expected-Stream, which WithExpectStream would set
	// on every publish.
	s.expectStream = cfg.Stream
	// The list must never be empty: without options nats.go publishes
	// with its default retries, the reordering the first one prevents.
	s.pubOpts = []jetstream.PublishOpt{
		// The library would retry a message the stream had no responder
		// for after a pause, behind the messages sent since; the pipeline
		// retries it with everything after it instead.
		jetstream.WithRetryAttempts(0),
		// Waiting for a free slot is bounded like waiting for an ack.
		jetstream.WithStallWait(cfg.AckTimeout),
	}
	s.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxInFlight),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
	)
	if err == nil {
		err = s.ensureStream(ctx)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// Conn is the sink's connection, for a checkpoint kept in the same NATS.
// It stays open until Close.
func (s *Sink) Conn() *nats.Conn { return s.nc }

// Health is nil while the connection is up, and says why not otherwise;
// a readiness probe can report it.
func (s *Sink) Health() error {
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("nats sink: connection is %s", st)
	}
	return nil
}

// Publish sends msgs and returns nil only when every one is accepted: in
// JetStream mode, when its PubAck arrived (a repeat that the stream
// dropped as a duplicate counts as accepted); in core mode, when the server
// has received it. Otherwise it returns a *sink.BatchError with one entry
// per message. A message larger than the server (max_payload) or the
// stream (max_msg_size) takes fails with sink.TooLarge, and one that can
// never be published for another reason with a sink.TerminalError.
//
// Messages are sent in batch order on one connection, which the server
// processes in order. An object's messages go in successive rounds, each
// sent only after the previous one's acks (sink.PublishInOrder), so a
// failed message is never followed by a stored later change of the same
// object. After a failure that affects the connection, the rest of the
// round is not sent and fails with the same error.
func (s *Sink) Publish(ctx context.Context, msgs []*wire.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	// Rounds of one message per object: an object's later change is sent
	// only once its earlier one was accepted, so a failed change is never
	// followed by a stored later one.
	if s.js != nil {
		return sink.PublishInOrder(ctx, msgs, s.publishJetStream)
	}
	return sink.PublishInOrder(ctx, msgs, s.publishCore)
}

// publishJetStream publishes asynchronously, at most MaxInFlight awaiting
// acks across all callers, then waits for every ack.
func (s *Sink) publishJetStream(ctx context.Context, msgs []*wire.Message) []error {
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	var stop error
	conn := s.nc.Stats().Reconnects
	for i, m := range msgs {
		if stop == nil && ctx.Err() != nil {
			stop = fmt.Errorf("nats sink: %w", ctx.Err())
		}
		if stop == nil && s.nc.Stats().Reconnects != conn {
			// Earlier messages went out on a connection that is gone and
			// may be lost; sending later ones on the new connection could
			// store an object's later change before its earlier one.
			stop = errors.New("nats sink: the connection was re-established during the batch")
		}
		nm, err := s.encodeUnless(stop, m)
		if err != nil {
			errs[i] = err
			continue
		}
		f, err := s.js.PublishMsgAsync(nm, s.pubOpts...)
		if err != nil {
			errs[i] = sendFailed(nm.Subject, err, &stop)
			continue
		}
		futures[i] = f
	}

	duplicates := 0
	for i, f := range futures {
		if f == nil {
			continue
		}
		ack, err := awaitAck(ctx, f)
		switch {
		case err != nil:
			errs[i] = err
		case ack.Duplicate:
			duplicates++
		}
	}
	if duplicates > 0 {
		s.log.Debug("nats sink: repeats dropped by the stream's duplicate window", "count", duplicates)
	}
	return errs
}

// awaitAck waits for f's PubAck, and returns it, or the error f failed
// with, or ctx's end, whichever comes first.
func awaitAck(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	// Most acks are in by the time the round is sent; the error channel,
	// which the future makes on the first call of Err, is made only
	// for one that is not.
	ok := f.Ok()
	select {
	case ack := <-ok:
		return ack, nil
	default:
	}
	select {
	case ack := <-ok:
		return ack, nil
	case err := <-f.Err():
		return nil, publishError(f.Msg().Subject, err)
	case <-ctx.Done():
		return nil, fmt.Errorf("nats sink: waiting for the ack of %s: %w", f.Msg().Subject, ctx.Err())
	}
}

// publishCore publishes on core NATS and flushes, so that the server has
// every message when it returns.
func (s *Sink) publishCore(ctx context.Context, msgs []*wire.Message) []error {
	errs := make([]error, len(msgs))
	var stop error
	for i, m := range msgs {
		if stop == nil && ctx.Err() != nil {
			stop = fmt.Errorf("nats sink: %w", ctx.Err())
		}
		nm, err := s.encodeUnless(stop, m)
		if err != nil {
			errs[i] = err
			continue
		}
		if err := s.nc.PublishMsg(nm); err != nil {
			errs[i] = sendFailed(nm.Subject, err, &stop)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	if err := s.nc.FlushWithContext(fctx); err != nil {
		err = fmt.Errorf("nats sink: flush: %w", err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// encodeUnless is m's NATS message, or the error m fails with instead:
// stop, once an earlier failure or the end of the caller's context has cut
// the round short, or why m cannot be encoded, which no retry fixes.
func (s *Sink) encodeUnless(stop error, m *wire.Message) (*nats.Msg, error) {
	if stop != nil {
		return nil, stop
	}
	nm, err := s.encode(m)
	if err != nil {
		return nil, sink.Terminal(fmt.Errorf("nats sink: encode event %s: %w", m.ID, err))
	}
	return nm, nil
}

// sendFailed is the error of a message to subject whose send failed with
// err. Unless no retry can fix it, the failure is the connection's, and it
// also cuts the rest of the round short: *stop is set to it.
func sendFailed(subject string, err error, stop *error) error {
	err = publishError(subject, err)
	if !sink.IsTerminal(err) {
		*stop = err
	}
	return err
}

// jsErrCodeHeaderExceedsMaximum is the stream's answer to a message whose
// headers pass 64 KiB; nats.go has no name for it.
const jsErrCodeHeaderExceedsMaximum jetstream.ErrorCode = 10097

// publishError wraps a failure to publish to subject, marking those that
// no retry can fix as terminal.
func publishError(subject string, err error) error {
	if errors.Is(err, nats.ErrReconnectBufExceeded) {
		// What nats.go says when publishing while disconnected, with the
		// reconnect buffer off.
		return fmt.Errorf("nats sink: publish to %s: not connected, reconnecting: %w", subject, err)
	}
	err = fmt.Errorf("nats sink: publish to %s: %w", subject, err)
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return sink.TooLarge(err)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return sink.TooLarge(err)
	case errors.Is(err, nats.ErrBadSubject),
		errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeHeaderExceedsMaximum:
		return sink.Terminal(err)
	}
	return err
}

// Close drains the connection: what was published is flushed, then the
// connection closes. It waits until the drain ends (at most about
// drainTimeout) or ctx does, whichever comes first; at ctx's end it closes
// the connection at once and says so. A message whose ack had not come is
// not lost: the pipeline never counted it as delivered. Close may be
// called more than once; later calls return the first's error.
func (s *Sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if err := s.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.nc.Close()
			s.closeErr = fmt.Errorf("nats sink: close: %w", err)
			return
		}
		select {
		case <-s.closed:
		case <-ctx.Done():
			s.nc.Close()
			s.closeErr = fmt.Errorf("nats sink: close: the drain did not finish in time: %w", context.Cause(ctx))
		}
	})
	return s.closeErr
}
