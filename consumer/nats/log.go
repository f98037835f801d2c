package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// Defaults of a Log's timing. Tests shorten them.
const (
	// defaultProgressEvery is how often a Follow with nothing to read
	// sends a progress record: short beside any delete grace (1s at
	// least, 24h by default), so that an idle informer's position stays
	// fresh, and long enough that 50 idle readers cost the server only
	// 20 small requests a second.
	defaultProgressEvery = 5 * time.Second
	// defaultCatchUpWait is how long a read that has not caught up waits
	// for a message before asking the server whether anything is left: a
	// filter whose last messages expired delivers nothing at all.
	defaultCatchUpWait = time.Second
	// defaultBatch is how many messages a read asks the server for at
	// once: enough to read a large state quickly, few enough that 50
	// readers in one process hold little (the client buffers a batch).
	defaultBatch = 128
)

// Log is the messages of one resource of one cluster on the bridge's
// JetStream stream, optionally of one namespace. It implements
// consumer.Log; its methods may be called concurrently, and each call
// uses an ordered consumer of its own, deleted when the call returns.
type Log struct {
	js     jetstream.JetStream
	stream string
	filter string
	id     string
	log    *slog.Logger

	progressEvery time.Duration
	catchUpWait   time.Duration
	batch         int
}

var _ consumer.Log = (*Log)(nil)

// NewLog returns the Log of opts.Resource in opts.Cluster (and
// opts.Namespace when set) on the stream cfg names. It reads only the
// subjects of that resource and cluster: the filter is made from the
// bridge's subject layout as the bridge makes subjects. It does not
// contact the server.
func NewLog(js jetstream.JetStream, cfg Config, opts consumer.Options) (*Log, error) {
	if js == nil {
		return nil, errors.New("nats consumer: no JetStream context")
	}
	cfg = cfg.withDefaults()
	tmpl, err := wire.ParseSubjectTemplate(cfg.Subject, cfg.SubjectPrefix)
	if err != nil {
		return nil, fmt.Errorf("nats consumer: subject layout %q: %w", cfg.Subject, err)
	}
	filter, err := tmpl.Filter(opts.Cluster, opts.Resource, opts.Namespace)
	if err != nil {
		return nil, fmt.Errorf("nats consumer: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Log{
		js:            js,
		stream:        cfg.Stream,
		filter:        filter,
		id:            logID(cfg.Stream, filter),
		log:           logger.With("stream", cfg.Stream, "filter", filter),
		progressEvery: defaultProgressEvery,
		catchUpWait:   defaultCatchUpWait,
		batch:         defaultBatch,
	}, nil
}

// Filter is the subject filter the Log reads.
func (l *Log) Filter() string { return l.filter }

// ReadState implements consumer.Log. It reads the last message of every
// subject of the filter, in stream order, up to the filter's last message
// at the time it starts, and returns the position after the last one it
// read. An empty filter returns at once.
func (l *Log) ReadState(ctx context.Context, fn func(consumer.Record) error) (string, error) {
	st, info, err := l.streamInfo(ctx)
	if err != nil {
		return "", err
	}
	if _, err := grace(info); err != nil {
		return "", err
	}
	// The state is read at start: every message of the filter stored
	// before the server's time of this info has a sequence up to the
	// filter's last, looked up next.
	start := position{log: l.id, created: info.Created.UnixNano(), seq: info.State.LastSeq, ms: info.TimeStamp.UnixMilli()}
	last, err := st.GetLastMsgForSubject(ctx, l.filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return start.String(), nil
	}
	if err != nil {
		return "", fmt.Errorf("nats consumer: last message of %s in stream %s: %w", l.filter, l.stream, err)
	}
	r, err := l.open(ctx, jetstream.DeliverLastPerSubjectPolicy, 0)
	if err != nil {
		return "", err
	}
	defer r.close()
	r.pos = position{log: l.id, created: start.created}
	for {
		msg, md, err := r.next(ctx, l.catchUpWait)
		if err != nil {
			return "", err
		}
		if msg == nil {
			// Nothing for a while: the last messages may have expired
			// since the lookup. Done when the server has nothing left.
			if _, ok := r.caughtUp(ctx); ok {
				break
			}
			continue
		}
		if err := fn(r.record(msg, md)); err != nil {
			return "", err
		}
		if md.Sequence.Stream >= last.Sequence || md.NumPending == 0 {
			break
		}
	}
	end := r.pos
	if end.seq == 0 {
		end.seq = start.seq
	}
	end.ms = start.ms
	return end.String(), nil
}

// Follow implements consumer.Log. It returns an error wrapping
// consumer.ErrExpired when from is not a position of this Log, when the
// stream was recreated or lost messages after it, and when from is older
// than the stream's delete grace (less a tenth): a delete after it may
// have expired unseen. While it runs it also returns that error when the
// stream is recreated, and when it falls that far behind (the server
// cannot be reached, or fn is slow).
func (l *Log) Follow(ctx context.Context, from string, fn func(consumer.Record) error) error {
	p, err := parsePosition(from)
	if err != nil {
		return err
	}
	_, info, err := l.streamInfo(ctx)
	if notFound(err) {
		return fmt.Errorf("%w: %w", err, consumer.ErrExpired)
	}
	if err != nil {
		return err
	}
	g, err := grace(info)
	if err != nil {
		return err
	}
	if err := l.checkFollow(p, info, g); err != nil {
		return err
	}
	r, err := l.open(ctx, jetstream.DeliverByStartSequencePolicy, p.seq+1)
	if err != nil {
		return err
	}
	defer r.close()
	r.pos = p
	r.limit = maxAge(g)
	r.offset = time.Until(info.TimeStamp)
	// The stream may have been recreated between the check and the
	// consumer.
	if err := r.checkStream(ctx); err != nil {
		return err
	}
	caught := false
	progress := func(at time.Time) error {
		caught = true
		r.pos = r.pos.withTime(at)
		return fn(consumer.Record{Position: r.pos.String()})
	}
	// Caught up already: nothing after from, or nothing of the filter.
	if at, ok := r.caughtUp(ctx); ok {
		if err := progress(at); err != nil {
			return err
		}
	}
	for {
		wait := l.progressEvery
		if !caught {
			wait = l.catchUpWait
		}
		msg, md, err := r.next(ctx, wait)
		if err != nil {
			return err
		}
		if msg == nil {
			// Idle: check that the stream is still the one the position
			// was made on (a deleted stream takes the consumer with it,
			// and the ordered consumer would go on with a new one), then
			// whether everything has been read.
			if err := r.checkStream(ctx); errors.Is(err, consumer.ErrExpired) {
				return err
			} else if err != nil {
				// No progress this time; the position ages until the
				// server answers again.
				l.log.Debug("nats consumer: stream info", "err", err)
				continue
			}
			at, ok := r.caughtUp(ctx)
			if !ok {
				continue
			}
			if err := r.checkAge(at); err != nil {
				return err
			}
			if err := progress(at); err != nil {
				return err
			}
			continue
		}
		if err := r.checkAge(time.Now().Add(r.offset)); err != nil {
			return err
		}
		if md.Consumer != r.lastCons {
			// The ordered consumer was recreated (a reconnect, a lost
			// consumer): check that the stream was not.
			if err := r.checkStream(ctx); err != nil {
				return err
			}
		}
		if err := fn(r.record(msg, md)); err != nil {
			return err
		}
		if !caught && md.NumPending == 0 {
			// Delivered after the info was taken, with nothing left: every
			// message stored before the info's time has been read.
			if err := progress(info.TimeStamp); err != nil {
				return err
			}
		}
	}
}

// streamInfo looks the stream up.
func (l *Log) streamInfo(ctx context.Context) (jetstream.Stream, *jetstream.StreamInfo, error) {
	s, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, nil, fmt.Errorf("nats consumer: stream %s: %w", l.stream, err)
	}
	return s, s.CachedInfo(), nil
}
