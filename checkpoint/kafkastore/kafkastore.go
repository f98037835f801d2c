package kafkastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/bounded"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/wire"
)

const (
	// openTimeout bounds Open's talk with the brokers when its context has
	// no deadline of its own, so that an unresponsive cluster fails the
	// start-up instead of hanging it.
	openTimeout = 2 * time.Minute
	// writeAttempts is how often kafka-go tries a produce request before
	// Commit fails; the checkpoint Writer retries on its next flush.
	writeAttempts = 3
	// writeTimeout bounds one produce request.
	writeTimeout = 30 * time.Second
	// batchSize bounds the records of one produce request. A flush holds
	// one record per object changed since the last one: thousands at most.
	batchSize = 5000
)

// Options say how Open makes and writes the topic. The bridge takes them
// from the BRIDGE_KAFKA_* variables the sink reads too.
type Options struct {
	// CreateTopic creates a missing topic (BRIDGE_KAFKA_CREATE_TOPICS).
	CreateTopic bool
	// ReplicationFactor of a topic Open creates; -1 or 0 is the broker's
	// default (BRIDGE_KAFKA_REPLICATION_FACTOR).
	ReplicationFactor int
	// MaxMessageBytes bounds a record and a produce request
	// (BRIDGE_KAFKA_MAX_MESSAGE_BYTES); 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// BatchTimeout is how long a partial batch waits for more records
	// (BRIDGE_KAFKA_BATCH_TIMEOUT); 0 means DefaultBatchTimeout.
	BatchTimeout time.Duration
	// Dropped, when set, is told the resource of each record a Commit
	// leaves out because it is larger than MaxMessageBytes, for a metric.
	// It must not block.
	Dropped func(resource string)
}

// Defaults of Options, those of the variables they mirror.
const (
	// DefaultMaxMessageBytes is Kafka's default message.max.bytes less
	// the 12 bytes of a batch header the broker counts.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultBatchTimeout lets the records of one flush go in one batch
	// without delaying the flush noticeably.
	DefaultBatchTimeout = 10 * time.Millisecond
)

// withDefaults fills the fields of o left zero.
func (o Options) withDefaults() Options {
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = -1
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.BatchTimeout == 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.Dropped == nil {
		o.Dropped = func(string) {}
	}
	return o
}

// Store is a checkpoint.Store kept in a compacted Kafka topic. It is safe
// for concurrent use; Commits are applied one at a time, and Load does not
// wait for a Commit's write.
type Store struct {
	topic     string
	log       *slog.Logger
	transport *kafkago.Transport
	stop      context.CancelFunc
	w         *kafkago.Writer

	// commitMu serialises Commits, so that they land in order. Only a
	// Commit changes objects and last, under mu, so a Commit may read them
	// without mu.
	commitMu sync.Mutex
	mu       sync.RWMutex
	objects  map[string]map[string]checkpoint.Position
	last     map[string]string

	// dropped is told of each record left out as too large (see write).
	dropped func(resource string)

	closeOnce sync.Once
}

var _ checkpoint.Store = (*Store)(nil)

// Open makes sure topic exists and is compacted, creating it (one
// partition, cleanup.policy=compact, opts.ReplicationFactor) when it is
// absent and opts.CreateTopic allows; a missing topic is otherwise an error
// that names it. It then reads every partition up to the end offsets it
// finds, so that Load can answer from memory. conn is the connection to
// the cluster (kafkaconn.Config.Parse; the bridge shares its sink's).
func Open(ctx context.Context, conn *kafkaconn.Conn, topic string, opts Options, log *slog.Logger) (*Store, error) {
	if err := wire.CheckTopicName(topic); err != nil {
		return nil, fmt.Errorf("checkpoint: kafka: BRIDGE_CHECKPOINT: %w", err)
	}
	if conn == nil {
		return nil, errors.New("checkpoint: kafka: no connection: make one with kafkaconn.Config.Parse")
	}
	if opts.MaxMessageBytes < 0 || opts.BatchTimeout < 0 {
		return nil, fmt.Errorf("checkpoint: kafka: Options.MaxMessageBytes (%d) and Options.BatchTimeout (%s) must not be negative", opts.MaxMessageBytes, opts.BatchTimeout)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	// The transport outlives Open's context: the final flush runs after
	// the bridge's context has ended.
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	transport := conn.Transport(tctx, []string{topic})
	s := &Store{
		topic:     topic,
		log:       log,
		transport: transport,
		stop:      stop,
		objects:   map[string]map[string]checkpoint.Position{},
		last:      map[string]string{},
		dropped:   opts.Dropped,
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, openTimeout)
		defer cancel()
	}
	start := time.Now()
	records, err := s.load(ctx, conn, opts)
	if err != nil {
		s.closeTransport()
		return nil, fmt.Errorf("checkpoint: kafka: topic %s: %w", topic, err)
	}
	s.w = &kafkago.Writer{
		Addr:         conn.Addr(),
		Transport:    transport,
		Balancer:     kafkago.Murmur2Balancer{Consistent: true},
		RequiredAcks: kafkago.RequireAll, // a checkpoint must survive a broker
		MaxAttempts:  writeAttempts,
		BatchSize:    batchSize,
		BatchBytes:   int64(opts.MaxMessageBytes),
		BatchTimeout: opts.BatchTimeout,
		WriteTimeout: writeTimeout,
	}
	log.Info("checkpoint read", "topic", topic, "records", records, "resources", len(s.last),
		"took", time.Since(start).Round(time.Millisecond))
	return s, nil
}

// load ensures the topic and reads it to its end, returning the number of
// records read.
func (s *Store) load(ctx context.Context, conn *kafkaconn.Conn, opts Options) (int, error) {
	client := &kafkago.Client{Addr: conn.Addr(), Transport: s.transport}
	if err := ensureTopic(ctx, client, opts, s.topic, s.log); err != nil {
		return 0, err
	}
	n := 0
	err := conn.ReadTopic(ctx, client, s.topic, func(m kafkago.Message) error {
		n++
		p, err := parse(m.Key, m.Value)
		if err != nil {
			return err
		}
		s.apply(p)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// apply puts a record read from the topic into memory. Records of a key
// come in offset order, so the last one wins.
func (s *Store) apply(p parsed) {
	switch {
	case p.key == "":
		s.last[p.resource] = p.last
	case p.deleted:
		delete(s.objects[p.resource], p.key)
	default:
		objs := s.objects[p.resource]
		if objs == nil {
			objs = map[string]checkpoint.Position{}
			s.objects[p.resource] = objs
		}
		objs[p.key] = p.pos
	}
}

// Load implements checkpoint.Store, from memory.
func (s *Store) Load(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
	if resource == "" {
		return checkpoint.Snapshot{}, errors.New("checkpoint: kafka: load: empty resource name")
	}
	if err := ctx.Err(); err != nil {
		return checkpoint.Snapshot{}, fmt.Errorf("checkpoint: kafka: load %s: %w", resource, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap := checkpoint.Snapshot{Objects: maps.Clone(s.objects[resource]), LastResourceVersion: s.last[resource]}
	if snap.Objects == nil {
		snap.Objects = map[string]checkpoint.Position{}
	}
	return snap, nil
}

var _ checkpoint.Lister = (*Store)(nil)

// Resources implements checkpoint.Lister, from memory.
func (s *Store) Resources(ctx context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for res, objs := range s.objects {
		if len(objs) > 0 {
			out = append(out, res)
		}
	}
	return out, nil
}

// Commit implements checkpoint.Store. It writes one record per record
// given (a tombstone for a delete) and one per resource touched, in one
// batched write acknowledged by every in-sync replica, and applies them to
// memory only once the write succeeded. See the package documentation for
// what a failed Commit leaves in the topic.
func (s *Store) Commit(ctx context.Context, records []checkpoint.Record) error {
	if len(records) == 0 {
		return nil
	}
	for i, r := range records {
		switch {
		case r.Resource == "" || strings.Contains(r.Resource, "/"):
			return fmt.Errorf("checkpoint: kafka: record %d (key %q): resource %q is empty or holds a '/'", i, r.Key, r.Resource)
		case r.Key == "":
			return fmt.Errorf("checkpoint: kafka: record %d (resource %q): empty key", i, r.Resource)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: kafka: commit: %w", err)
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()

	msgs := make([]kafkago.Message, 0, len(records)+1)
	last := map[string]string{}
	var touched []string
	for _, r := range records {
		m := kafkago.Message{Key: objectKey(r.Resource, r.Key)}
		if !r.Deleted {
			v, err := json.Marshal(r.Position)
			if err != nil {
				return fmt.Errorf("checkpoint: kafka: encode %s %q: %w", r.Resource, r.Key, err)
			}
			m.Value = v
		}
		msgs = append(msgs, m)
		cur, seen := last[r.Resource]
		if !seen {
			cur = s.last[r.Resource]
			touched = append(touched, r.Resource)
		}
		last[r.Resource] = checkpoint.LaterResourceVersion(cur, r.ResourceVersion)
	}
	for _, res := range touched {
		if last[res] == s.last[res] {
			continue
		}
		v, err := json.Marshal(resourceValue{LastResourceVersion: last[res]})
		if err != nil {
			return fmt.Errorf("checkpoint: kafka: encode %s: %w", res, err)
		}
		msgs = append(msgs, kafkago.Message{Key: resourceKey(res), Value: v})
	}
	for i := range msgs {
		msgs[i].Topic = s.topic
	}
	dropped, err := s.write(ctx, msgs, records)
	if err != nil {
		return fmt.Errorf("checkpoint: kafka: commit %d records to topic %s: %w", len(records), s.topic, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range records {
		if !dropped[i] {
			s.apply(parsed{resource: r.Resource, key: r.Key, deleted: r.Deleted, pos: r.Position})
		}
	}
	maps.Copy(s.last, last)
	return nil
}

// write writes msgs, made from records in order (then those of the
// resources), and returns which records it left out.
//
// A record larger than BRIDGE_KAFKA_MAX_MESSAGE_BYTES can never be written:
// it is left out, logged, and the others are written. Only an object key
// of tens of kilobytes makes a record that large, and such an object's
// events, which carry its key and name several times, are larger than the
// sink takes as well: none of them is ever delivered, so there is no
// position to keep. Failing the Commit instead would fail every flush from
// then on, and stop the stream. A restart finds the object missing from
// the checkpoint and tries to publish it again.
func (s *Store) write(ctx context.Context, msgs []kafkago.Message, records []checkpoint.Record) (map[int]bool, error) {
	index := make(map[string][]int, len(records)) // record indexes by message key
	for i, r := range records {
		k := string(objectKey(r.Resource, r.Key))
		index[k] = append(index[k], i)
	}
	dropped := map[int]bool{}
	for {
		err := s.w.WriteMessages(ctx, msgs...)
		var tooLarge kafkago.MessageTooLargeError
		if !errors.As(err, &tooLarge) {
			return dropped, err
		}
		at, ok := index[string(tooLarge.Message.Key)]
		if !ok {
			return dropped, err // a resource's record: never that large
		}
		for _, i := range at {
			dropped[i] = true
		}
		r := records[at[0]]
		s.log.Warn("checkpoint: kafka: record too large for BRIDGE_KAFKA_MAX_MESSAGE_BYTES; left out, as the object's events cannot be published either",
			"topic", s.topic, "resource", r.Resource, "key", bounded.Abbrev(r.Key), "uid", r.UID,
			"resourceVersion", r.ResourceVersion, "bytes", len(tooLarge.Message.Key)+len(tooLarge.Message.Value))
		s.dropped(r.Resource)
		msgs = tooLarge.Remaining
	}
}

// Close implements checkpoint.Store: it waits for writes in flight and
// releases the connections. Calling it more than once is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		_ = s.w.Close() // kafka-go's Close always returns nil
		s.closeTransport()
	})
	return nil
}

func (s *Store) closeTransport() {
	s.stop()
	s.transport.CloseIdleConnections()
}
