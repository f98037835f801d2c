package nats

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// grace is how long after it is stored a message of the stream may be
// gone: the delete grace period the bridge records in the stream's
// metadata (MetadataDeleteTTL) when the stream allows per-message TTLs,
// and the stream's MaxAge when it has one; the shorter of the two. Zero
// means messages leave only when a later one of the same subject replaces
// them, so positions never age.
//
// A stream that allows per-message TTLs without saying how long deletes
// live is refused: a consumer could not tell when a position stops being
// safe to follow.
func grace(info *jetstream.StreamInfo) (time.Duration, error) {
	g := info.Config.MaxAge
	if !info.Config.AllowMsgTTL {
		return g, nil
	}
	v, ok := info.Config.Metadata[wire.MetadataDeleteTTL]
	if !ok {
		return 0, fmt.Errorf("nats consumer: stream %s allows per-message TTLs but has no %s metadata; a consumer cannot tell when a delete expires: set it to the bridge's BRIDGE_NATS_DELETE_TTL",
			info.Config.Name, wire.MetadataDeleteTTL)
	}
	ttl, err := time.ParseDuration(v)
	if err != nil || ttl <= 0 {
		return 0, fmt.Errorf("nats consumer: stream %s: metadata %s=%q is not a positive Go duration", info.Config.Name, wire.MetadataDeleteTTL, v)
	}
	if g == 0 || ttl < g {
		g = ttl
	}
	return g, nil
}

// maxAge is how old a position's time may be, by the server's clock, for
// a Follow from it: the grace less a margin of a tenth, for clock skew
// between servers and the time between storing and reading; 0 for no
// limit.
func maxAge(g time.Duration) time.Duration { return g - g/10 }

// lossy reports whether the stream may drop messages other than by age or
// by a later message of the same subject: then a Follow from before its
// first message may have missed one.
func lossy(cfg jetstream.StreamConfig) bool {
	return cfg.MaxMsgsPerSubject != 1 || cfg.MaxMsgs > 0 || cfg.MaxBytes > 0
}

// checkFollow returns an error wrapping consumer.ErrExpired when the
// stream may no longer hold every message after p.
func (l *Log) checkFollow(p position, info *jetstream.StreamInfo, g time.Duration) error {
	expired := func(format string, args ...any) error {
		return fmt.Errorf("nats consumer: position %s of stream %s: %s: %w", p, l.stream, fmt.Sprintf(format, args...), consumer.ErrExpired)
	}
	if p.log != l.id {
		return expired("made by a reader of another stream or subject filter")
	}
	if created := info.Created.UnixNano(); p.created != created {
		return expired("the stream was recreated (created %s)", info.Created.UTC().Format(time.RFC3339Nano))
	}
	if last := info.State.LastSeq; p.seq > last {
		return expired("sequence %d is past the stream's last, %d", p.seq, last)
	}
	if lossy(info.Config) && p.seq+1 < info.State.FirstSeq {
		return expired("the stream dropped messages after it (its first sequence is %d)", info.State.FirstSeq)
	}
	now := info.TimeStamp.UnixMilli()
	age := time.Duration(now-p.ms) * time.Millisecond
	if age < -time.Minute {
		return expired("its time is %s ahead of the server's", -age)
	}
	if a := maxAge(g); a > 0 && age > a {
		return expired("%s old, past the %s a delete may stay in the stream (less a tenth)", age.Round(time.Millisecond), g)
	}
	return nil
}

// notFound reports whether err says the stream does not exist.
func notFound(err error) bool { return errors.Is(err, jetstream.ErrStreamNotFound) }
