package natskv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/checkpoint"
)

const (
	// markerTTL is how long the marker a deleted object leaves in the
	// bucket lives, when the bucket allows per-message TTLs. An hour lets
	// anyone watching the bucket see the delete, then frees the space.
	markerTTL = time.Hour
	// maxInFlight bounds the records of one Commit awaiting their acks.
	maxInFlight = 4096
	// ackTimeout bounds the wait for one record's ack.
	ackTimeout = 10 * time.Second
	// loadIdleTimeout fails a Load that receives nothing for this long,
	// such as when the server went away in the middle of it.
	loadIdleTimeout = 30 * time.Second
)

var validBucket = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// ValidBucket reports whether name can name a KV bucket.
func ValidBucket(name string) error {
	if !validBucket.MatchString(name) {
		return fmt.Errorf("checkpoint: nats-kv: %q is not a bucket name: use letters, digits, \"-\" and \"_\"", name)
	}
	return nil
}

// Options say how Open treats a missing bucket.
type Options struct {
	// Create makes the bucket when it does not exist; otherwise a missing
	// bucket is an error.
	Create bool
	// Replicas of a bucket Open creates; 0 means 1.
	Replicas int
	// Dropped, when set, is told the resource of each record a Commit
	// leaves out as too large for the server or the bucket (see the
	// package documentation), for a metric. It must not block.
	Dropped func(resource string)
}

// Store is a checkpoint.Store in a JetStream key-value bucket. It is safe
// for concurrent use; Commits are applied one at a time.
type Store struct {
	js        jetstream.JetStream
	kv        jetstream.KeyValue
	st        jetstream.Stream // the bucket's stream
	bucket    string
	stream    string // the bucket's stream, KV_<bucket>
	subjects  string // subject prefix of the bucket's keys, $KV.<bucket>.
	markerTTL time.Duration
	log       *slog.Logger
	dropped   func(resource string)

	mu     sync.Mutex
	last   map[string]string // LastResourceVersion known to be stored, by resource
	closed bool
}

var _ checkpoint.Store = (*Store)(nil)

// Open opens the bucket on nc, creating it (file storage, one value per
// key) when it is absent and create is true. With create false a missing
// bucket is an error that names it. Close does not close nc.
func Open(ctx context.Context, nc *nats.Conn, bucket string, opts Options, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if nc == nil {
		return nil, errors.New("checkpoint: nats-kv: no connection")
	}
	if err := ValidBucket(bucket); err != nil {
		return nil, err
	}
	// The library's own bound on publishes awaiting acks (4000 by
	// default) must not be below the store's: past it the library gives
	// a publish only 200ms for a slot, which a busy server misses.
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncTimeout(ackTimeout),
		jetstream.WithPublishAsyncMaxPending(maxInFlight),
	)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: nats-kv: %w", err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !opts.Create {
			return nil, fmt.Errorf("checkpoint: nats-kv: bucket %s does not exist and BRIDGE_NATS_CREATE_STREAM=false: create it (nats kv add %s --history 1), or let the bridge create it: %w",
				bucket, bucket, err)
		}
		kv, err = createBucket(ctx, js, bucket, opts.Replicas)
		if err == nil {
			log.Info("checkpoint: nats-kv: created bucket", "bucket", bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: nats-kv: bucket %s: %w", bucket, err)
	}
	s := &Store{
		js:       js,
		kv:       kv,
		bucket:   bucket,
		stream:   "KV_" + bucket,
		subjects: "$KV." + bucket + ".",
		log:      log,
		last:     map[string]string{},
		dropped:  opts.Dropped,
	}
	if s.dropped == nil {
		s.dropped = func(string) {}
	}
	st, err := js.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: nats-kv: bucket %s: %w", bucket, err)
	}
	s.st = st
	if err := ownBucket(bucket, st.CachedInfo().Config); err != nil {
		return nil, err
	}
	if st.CachedInfo().Config.AllowMsgTTL {
		s.markerTTL = markerTTL
	}
	log.Info("checkpoint: nats-kv: bucket ready", "bucket", bucket, "deleteMarkerTTL", s.markerTTL)
	return s, nil
}

// ownBucket refuses a bucket that is a mirror of another or takes
// messages from others: the bridge writes its checkpoint there, and a
// mirror takes no writes, while in either the entries that came from
// elsewhere are not the bridge's, and a purge of the bucket's own
// subjects does not reach them.
func ownBucket(bucket string, cfg jetstream.StreamConfig) error {
	const own = "point BRIDGE_CHECKPOINT at a bucket of the bridge's own"
	if cfg.Mirror != nil {
		return fmt.Errorf("checkpoint: nats-kv: bucket %s is a mirror of %s, which takes no writes: %s", bucket, cfg.Mirror.Name, own)
	}
	if len(cfg.Sources) > 0 {
		names := make([]string, len(cfg.Sources))
		for i, src := range cfg.Sources {
			names[i] = src.Name
		}
		return fmt.Errorf("checkpoint: nats-kv: bucket %s takes messages from the source(s) %s, which would mix with the checkpoint: %s",
			bucket, strings.Join(names, ", "), own)
	}
	return nil
}

func createBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:         bucket,
		Replicas:       replicas,
		Description:    "kubebus bridge checkpoint",
		History:        1,
		Storage:        jetstream.FileStorage,
		LimitMarkerTTL: markerTTL,
	}
	kv, err := js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		// A server before 2.11: deleted keys keep their markers.
		cfg.LimitMarkerTTL = 0
		kv, err = js.CreateKeyValue(ctx, cfg)
	}
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Another bridge created it first.
		return js.KeyValue(ctx, bucket)
	}
	return kv, err
}

// Close implements checkpoint.Store. It does not close the connection.
// Calling it more than once is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.js.CleanupPublisher()
	}
	return nil
}

var errClosed = errors.New("checkpoint: nats-kv: store is closed")
