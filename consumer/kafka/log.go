package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// Config says where the bridge writes the resource's records. Set it as
// the bridge is set.
type Config struct {
	// Topic is the topic to read: the bridge's BRIDGE_KAFKA_TOPIC when it
	// writes every resource to one topic. Empty means the resource's own
	// topic, wire.TopicFor(TopicPrefix, resource).
	Topic string
	// TopicPrefix is the bridge's BRIDGE_KAFKA_TOPIC_PREFIX; empty means
	// wire.DefaultTopicPrefix.
	TopicPrefix string
}

// Timing of a Follow. Variables, so that tests can shorten them.
var (
	// checkEvery is how often a Follow lists the topic's end offsets and
	// metadata: to know it has caught up (and say so with a progress
	// record), to refresh its positions' time, and to notice a recreated
	// topic or new partitions. Every few seconds, as consumer.Log asks
	// of progress records; it costs two small requests per Follow.
	checkEvery = 3 * time.Second
	// pollWait bounds one wait for records, so that checks run on time
	// and a partition that stops short of its end offset (its last
	// offsets hold no records a consumer is given: compacted away, or
	// transaction markers) is probed rather than waited on.
	pollWait = time.Second
)

// expiryMargin is the part of delete.retention.ms a position may not
// reach: a position whose time is older than 90% of it is expired, so
// that clock skew between the bridge, the brokers and the consumer, and
// the time to read up to the tombstones, fit in the rest.
const expiryMargin = 0.9

// Log is one resource's records in one Kafka topic. It implements
// consumer.Log; its methods may be called concurrently.
//
// Each ReadState and Follow call opens a consuming client of its own,
// made from the options of the client given to NewLog, and closes it
// before it returns. That client is used as it is only for metadata,
// offset and config requests, which may run concurrently with anything
// else its owner does, so one client may serve any number of Logs and
// the caller's own producing or consuming (its consumer settings do not
// matter: they are replaced in the Log's own clients). The caller keeps
// owning it and closes it after the Logs are done.
type Log struct {
	client *kgo.Client
	admin  *kadm.Client
	topic  string
	log    *slog.Logger
}

var _ consumer.Log = (*Log)(nil)

// NewLog returns the Log of opts.Resource in the topic cfg names. Only
// Options.Resource and Options.Logger matter to the Log; records of other
// clusters (their tombstones included), namespaces and (with a topic
// shared by every resource) other resources are passed on for the
// ListerWatcher to skip.
func NewLog(client *kgo.Client, cfg Config, opts consumer.Options) (*Log, error) {
	if client == nil {
		return nil, errors.New("consumer/kafka: no client")
	}
	if opts.Resource.Resource == "" {
		return nil, errors.New("consumer/kafka: Options.Resource is empty; name the resource, e.g. {Resource: \"configmaps\"}")
	}
	if regex, _ := client.OptValue(kgo.ConsumeRegex).(bool); regex {
		return nil, errors.New("consumer/kafka: the client consumes by regular expression (kgo.ConsumeRegex), which its options would pass on to the Log's own clients; give a client without it")
	}
	topic := cfg.Topic
	if topic == "" {
		prefix := cfg.TopicPrefix
		if prefix == "" {
			prefix = wire.DefaultTopicPrefix
		}
		topic = wire.TopicFor(prefix, schema.GroupResource{Group: opts.Resource.Group, Resource: opts.Resource.Resource})
	}
	if err := wire.CheckTopicName(topic); err != nil {
		return nil, fmt.Errorf("consumer/kafka: topic: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Log{
		client: client,
		admin:  kadm.NewClient(client),
		topic:  topic,
		log:    logger.With("topic", topic),
	}, nil
}

// Topic is the topic the Log reads.
func (l *Log) Topic() string { return l.topic }

// consumerClient opens a client that reads the Log's topic from the given
// offsets, with the caller's connection settings. It reads what a
// consumer outside transactions reads (every record up to the high
// watermark, which is what ListEndOffsets gives) and never moves on its
// own: with reset false, an offset out of range is an error for the
// partition; with reset true, the partition starts again at the log start.
func (l *Log) consumerClient(offsets map[int32]int64, reset bool) (*kgo.Client, error) {
	parts := make(map[int32]kgo.Offset, len(offsets))
	for p, o := range offsets {
		parts[p] = kgo.NewOffset().At(o)
	}
	resetTo := kgo.NoResetOffset()
	if reset {
		resetTo = kgo.NewOffset().AtStart()
	}
	// Group settings (the group, commits, callbacks) are left out: kgo
	// refuses most of them without a group, and a Log reads no group.
	var opts []kgo.Opt
	for _, o := range l.client.Opts() {
		if _, group := o.(kgo.GroupOpt); !group {
			opts = append(opts, o)
		}
	}
	opts = append(opts,
		kgo.ConsumeTopics(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.topic: parts}),
		kgo.ConsumeResetOffset(resetTo),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("consumer/kafka: consuming client for topic %s: %w", l.topic, err)
	}
	return cl, nil
}

// decode makes a consumer.Record of a Kafka record; pos is the position
// after it.
func decode(r *kgo.Record, pos string) consumer.Record {
	rec := consumer.Record{Key: string(r.Key), Position: pos}
	if rec.Key == "" {
		// Every record the bridge writes has a key; an empty one would
		// read as a progress record.
		rec.Key = fmt.Sprintf("(no key: partition %d offset %d)", r.Partition, r.Offset)
		rec.Err = fmt.Errorf("consumer/kafka: record at partition %d offset %d has no key; the bridge keys every record", r.Partition, r.Offset)
		return rec
	}
	headers := func(yield func(string, string) bool) {
		for _, h := range r.Headers {
			if !yield(h.Key, string(h.Value)) {
				return
			}
		}
	}
	if r.Value == nil {
		// A tombstone: the object of the key, in the cluster it names
		// (none, from a bridge before the header), is gone.
		rec.Cluster, _, _ = wire.Kafka.HeaderValue(headers, "cluster")
		return rec
	}
	m, err := wire.Kafka.Decode(r.Value, headers)
	if err != nil {
		rec.Err = fmt.Errorf("consumer/kafka: record %q at partition %d offset %d: %w", rec.Key, r.Partition, r.Offset, err)
		return rec
	}
	rec.Message = m
	return rec
}

// expired wraps consumer.ErrExpired with why.
func expired(format string, args ...any) error {
	return fmt.Errorf("consumer/kafka: %s: %w", fmt.Sprintf(format, args...), consumer.ErrExpired)
}

// isPollTimeout reports whether err is the end of a poll's own deadline
// while the call's context is still live.
func isPollTimeout(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}
