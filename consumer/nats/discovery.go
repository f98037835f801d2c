package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/internal/bounded"
	"github.com/kubebus/bridge/internal/logonce"
	"github.com/kubebus/bridge/internal/retry"
	"github.com/kubebus/bridge/wire"
)

// Waits of a DiscoveryLog between two tries to read the stream (missing,
// or the server unreachable): soon at first, as a bridge that starts
// creates the stream within seconds, then at most every 30 s.
const (
	discoveryRetryFirst = 500 * time.Millisecond
	discoveryRetryMax   = 30 * time.Second
)

// DiscoveryLog is the discovery documents the bridges publish to a
// JetStream stream (wire.Discovery on wire.DiscoverySubjects). It
// implements consumer.DiscoveryLog; Follow may be called concurrently,
// each call reading with an ordered consumer of its own (memory storage,
// removed by the server a minute after the call ends).
//
// Follow passes the last document of every cluster's subject, in stream
// order, then each new one as it is stored. While the stream is missing,
// or the server cannot be reached, it tries again with backoff, and logs
// it once per outage. After such a failure it reads again from the last
// documents, so a document may be passed more than once: the reader keeps
// the latest of each cluster, by Cluster. A document that does not decode
// (wire.UnmarshalDiscovery), or has another Content-Type, is skipped,
// counted (Skipped) and logged. So is one whose Cluster is not its
// subject's (its last token is not wire.EscapeToken(Cluster)): a
// document on kube._discovery.b that claims cluster a is not passed on as
// a's; such documents are logged once per subject (of the first
// mismatchLogged subjects).
type DiscoveryLog struct {
	js      jetstream.JetStream
	stream  string
	filter  string
	log     *slog.Logger
	skipped atomic.Int64
	// mismatched are the subjects whose mismatched document was logged.
	mismatched *logonce.Keys
	// synced is closed, once, by the first Follow call that reads to the
	// end of the stream.
	synced     chan struct{}
	syncedOnce sync.Once
}

// mismatchLogged is how many subjects' mismatched documents are logged.
const mismatchLogged = 100

var (
	_ consumer.DiscoveryLog    = (*DiscoveryLog)(nil)
	_ consumer.DiscoverySynced = (*DiscoveryLog)(nil)
)

// NewDiscoveryLog returns the DiscoveryLog of the stream cfg names, under
// cfg's subject prefix (cfg.Subject does not matter). It does not contact
// the server. logger may be nil.
func NewDiscoveryLog(js jetstream.JetStream, cfg Config, logger *slog.Logger) (*DiscoveryLog, error) {
	if js == nil {
		return nil, errors.New("nats consumer: no JetStream context")
	}
	cfg = cfg.withDefaults()
	if err := wire.CheckSubjectPrefix(cfg.SubjectPrefix); err != nil {
		return nil, fmt.Errorf("nats consumer: subject prefix %q: %w", cfg.SubjectPrefix, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	filter := wire.DiscoverySubjects(cfg.SubjectPrefix)
	return &DiscoveryLog{js: js, stream: cfg.Stream, filter: filter, log: logger.With("stream", cfg.Stream, "filter", filter),
		mismatched: logonce.New(mismatchLogged), synced: make(chan struct{})}, nil
}

// Synced implements consumer.DiscoverySynced: it is closed once a Follow
// call's consumer has no message pending, every document stored when it
// was made passed on (or skipped).
func (l *DiscoveryLog) Synced() <-chan struct{} { return l.synced }

func (l *DiscoveryLog) markSynced() { l.syncedOnce.Do(func() { close(l.synced) }) }

// Skipped is how many documents Follow calls have skipped, as they did
// not decode or were not their subject's cluster's.
func (l *DiscoveryLog) Skipped() int64 { return l.skipped.Load() }

// fnError carries the error of Follow's fn, which ends Follow.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// Follow implements consumer.DiscoveryLog.
func (l *DiscoveryLog) Follow(ctx context.Context, fn func(wire.Discovery) error) error {
	bo := retry.New(discoveryRetryFirst, discoveryRetryMax)
	failing := false
	for {
		read, err := l.follow(ctx, fn)
		var fe *fnError
		switch {
		case errors.As(err, &fe):
			return fe.err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if read {
			bo.Reset()
			failing = false
		}
		if !failing {
			failing = true
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				l.log.Info("nats consumer: no stream yet, waiting for a bridge to create it", "err", err)
			} else {
				l.log.Warn("nats consumer: cannot read discovery documents for now; trying again", "err", err)
			}
		}
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// follow reads with one ordered consumer until it fails, ctx ends or fn
// does (an *fnError). read is true once the consumer was made.
func (l *DiscoveryLog) follow(ctx context.Context, fn func(wire.Discovery) error) (read bool, err error) {
	cons, err := l.js.OrderedConsumer(ctx, l.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{l.filter},
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		InactiveThreshold: consumerInactive,
		MaxResetAttempts:  resetAttempts,
	})
	if err != nil {
		return false, fmt.Errorf("nats consumer: consumer on stream %s: %w", l.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return false, fmt.Errorf("nats consumer: read stream %s: %w", l.stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		l.markSynced()
	}
	for {
		msg, err := it.Next()
		if err != nil {
			return true, fmt.Errorf("nats consumer: read stream %s: %w", l.stream, err)
		}
		if err := l.pass(msg, fn); err != nil {
			return true, err
		}
		if md, err := msg.Metadata(); err == nil && md.NumPending == 0 {
			l.markSynced()
		}
	}
}

// pass hands msg's document to fn, or skips it; its error is fn's, as an
// *fnError.
func (l *DiscoveryLog) pass(msg jetstream.Msg, fn func(wire.Discovery) error) error {
	if ct := msg.Headers().Get(wire.NATSContentTypeHeader); ct != wire.DiscoveryContentType {
		l.skip(msg.Subject(), fmt.Errorf("Content-Type %q, not %s", ct, wire.DiscoveryContentType))
		return nil
	}
	d, err := wire.UnmarshalDiscovery(msg.Data())
	if err != nil {
		l.skip(msg.Subject(), err)
		return nil
	}
	if token := msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:]; token != wire.EscapeToken(d.Cluster) {
		l.skipped.Add(1)
		if l.mismatched.First(msg.Subject()) {
			l.log.Warn("nats consumer: skipped a discovery document of another cluster than its subject's (logged once per subject)",
				"subject", msg.Subject(), "cluster", bounded.Abbrev(d.Cluster))
		}
		return nil
	}
	if err := fn(d); err != nil {
		return &fnError{err}
	}
	return nil
}

func (l *DiscoveryLog) skip(subject string, err error) {
	l.skipped.Add(1)
	l.log.Warn("nats consumer: skipped a discovery document that does not decode", "subject", subject, "err", err)
}
