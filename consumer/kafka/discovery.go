package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/internal/bounded"
	"github.com/kubebus/bridge/internal/logonce"
	"github.com/kubebus/bridge/internal/retry"
	"github.com/kubebus/bridge/wire"
)

// Waits of a DiscoveryLog between two tries to read the topic (missing,
// or the brokers unreachable): soon at first, as a bridge that starts
// creates the topic within seconds, then at most every 30 s.
const (
	discoveryRetryFirst = 500 * time.Millisecond
	discoveryRetryMax   = 30 * time.Second
)

// DiscoveryLog is the discovery documents the bridges write to the
// compacted topic wire.DiscoveryTopic, keyed by cluster. It implements
// consumer.DiscoveryLog; Follow may be called concurrently, each call
// with a consuming client of its own (made from the options of the client
// given to NewDiscoveryLog, as a Log's).
//
// Follow reads every partition from its log start up to the end offsets
// it lists when it starts, keeping the latest document of each key, and
// passes those, by cluster name; then each record that follows, as it
// comes. While the topic is missing, or the brokers cannot be reached, it
// tries again with backoff, and logs it once per outage. After such a
// failure it reads the topic again from its start, so a document may be
// passed more than once: the reader keeps the latest of each cluster, by
// Cluster. A record that does not decode (wire.UnmarshalDiscovery), or
// has another content-type, is skipped, counted (Skipped) and logged; a
// tombstone is skipped. So is a document whose Cluster is not its key: one
// keyed b that claims cluster a is not passed on as a's; such documents
// are logged once per key (of the first mismatchLogged keys).
//
// The bridge creates the topic with one partition. A topic with more is
// read whole, and one given more partitions while Follow reads it is
// read again from its start, every partition, within checkEvery of the
// change.
type DiscoveryLog struct {
	client  *kgo.Client
	admin   *kadm.Client
	topic   string
	log     *slog.Logger
	skipped atomic.Int64
	// mismatched are the keys whose mismatched document was logged.
	mismatched *logonce.Keys
	// synced is closed, once, by the first Follow call that reads to the
	// end offsets.
	synced     chan struct{}
	syncedOnce sync.Once
}

// mismatchLogged is how many keys' mismatched documents are logged.
const mismatchLogged = 100

var (
	_ consumer.DiscoveryLog    = (*DiscoveryLog)(nil)
	_ consumer.DiscoverySynced = (*DiscoveryLog)(nil)
)

// NewDiscoveryLog returns the DiscoveryLog of the topic
// wire.DiscoveryTopic(cfg.TopicPrefix) (cfg.Topic does not matter: the
// bridge writes its documents there even when it writes every resource to
// one topic). It does not contact the brokers. logger may be nil.
func NewDiscoveryLog(client *kgo.Client, cfg Config, logger *slog.Logger) (*DiscoveryLog, error) {
	if client == nil {
		return nil, errors.New("consumer/kafka: no client")
	}
	if regex, _ := client.OptValue(kgo.ConsumeRegex).(bool); regex {
		return nil, errors.New("consumer/kafka: the client consumes by regular expression (kgo.ConsumeRegex), which its options would pass on to the DiscoveryLog's own clients; give a client without it")
	}
	prefix := cfg.TopicPrefix
	if prefix == "" {
		prefix = wire.DefaultTopicPrefix
	}
	topic := wire.DiscoveryTopic(prefix)
	if err := wire.CheckTopicName(topic); err != nil {
		return nil, fmt.Errorf("consumer/kafka: topic prefix %q: %w", prefix, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &DiscoveryLog{client: client, admin: kadm.NewClient(client), topic: topic, log: logger.With("topic", topic),
		mismatched: logonce.New(mismatchLogged), synced: make(chan struct{})}, nil
}

// Synced implements consumer.DiscoverySynced: it is closed once a Follow
// call has passed on the documents up to the end offsets it found when it
// began.
func (l *DiscoveryLog) Synced() <-chan struct{} { return l.synced }

// Topic is the topic the DiscoveryLog reads.
func (l *DiscoveryLog) Topic() string { return l.topic }

// Skipped is how many records Follow calls have skipped, as they did not
// decode or were not their key's cluster's.
func (l *DiscoveryLog) Skipped() int64 { return l.skipped.Load() }

// fnError carries the error of Follow's fn, which ends Follow.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// errNoTopic is follow's error while the topic does not exist.
var errNoTopic = errors.New("no such topic yet")

// errPartitionsAdded is follow's error when the topic has more partitions
// than when it started: Follow reads it again at once.
var errPartitionsAdded = errors.New("partitions added")

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
		if errors.Is(err, errPartitionsAdded) {
			l.log.Info("consumer/kafka: the discovery topic has partitions added; reading it again", "err", err)
			continue
		}
		if !failing {
			failing = true
			if errors.Is(err, errNoTopic) {
				l.log.Info("consumer/kafka: no discovery topic yet, waiting for a bridge to create it", "err", err)
			} else {
				l.log.Warn("consumer/kafka: cannot read discovery documents for now; trying again", "err", err)
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

// follow reads the topic once, from its start, until it fails, ctx ends
// or fn does (an *fnError). read is true once it has passed on the
// documents up to the end offsets.
func (l *DiscoveryLog) follow(ctx context.Context, fn func(wire.Discovery) error) (read bool, err error) {
	lg := &Log{client: l.client, admin: l.admin, topic: l.topic, log: l.log}
	ts, err := lg.describe(ctx)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return false, fmt.Errorf("consumer/kafka: topic %s: %w", l.topic, errNoTopic)
	}
	if err != nil {
		return false, err
	}
	n := len(ts.leaders)
	next, err := lg.offsets(ctx, true, n)
	if err != nil {
		return false, err
	}
	ends, err := lg.offsets(ctx, false, n)
	if err != nil {
		return false, err
	}
	parts := map[int32]kgo.Offset{}
	for p := range n {
		parts[int32(p)] = kgo.NewOffset().At(next[p])
	}
	var opts []kgo.Opt
	for _, o := range l.client.Opts() {
		if _, group := o.(kgo.GroupOpt); !group {
			opts = append(opts, o)
		}
	}
	opts = append(opts,
		kgo.ConsumeTopics(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.topic: parts}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("consumer/kafka: consuming client for topic %s: %w", l.topic, err)
	}
	defer cl.Close()

	// Up to the end offsets, the latest document of each key; latest is
	// nil once they are passed on.
	latest := map[string]wire.Discovery{}
	caughtUp := func() bool {
		for p := range n {
			if next[p] < ends[p] {
				return false
			}
		}
		return true
	}
	lastCheck := time.Now()
	for {
		if latest == nil && time.Since(lastCheck) >= checkEvery {
			lastCheck = time.Now()
			now, err := lg.describe(ctx)
			if err != nil {
				return read, err
			}
			if len(now.leaders) > n {
				return read, fmt.Errorf("consumer/kafka: topic %s: %d partitions, %d when read: %w", l.topic, len(now.leaders), n, errPartitionsAdded)
			}
		}
		if latest != nil && caughtUp() {
			for _, k := range slices.Sorted(maps.Keys(latest)) {
				if err := fn(latest[k]); err != nil {
					return true, &fnError{err}
				}
			}
			latest = nil
			read = true
			l.syncedOnce.Do(func() { close(l.synced) })
		}
		pctx, cancel := context.WithTimeout(ctx, pollWait)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return read, ctx.Err()
		}
		var errs []error
		fetches.EachError(func(_ string, p int32, err error) {
			if !isPollTimeout(ctx, err) {
				errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
			}
		})
		if len(errs) > 0 {
			return read, fmt.Errorf("consumer/kafka: read topic %s: %w", l.topic, errors.Join(errs...))
		}
		got := 0
		var ferr error
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			if ferr != nil || int(r.Partition) >= n {
				return
			}
			next[r.Partition] = r.Offset + 1
			d, ok := l.decode(r)
			switch {
			case !ok:
			case d.Cluster != string(r.Key):
				l.skipped.Add(1)
				if l.mismatched.First(string(r.Key)) {
					l.log.Warn("consumer/kafka: skipped a discovery document of another cluster than its key's (logged once per key)",
						"key", bounded.Abbrev(string(r.Key)), "cluster", bounded.Abbrev(d.Cluster), "partition", r.Partition, "offset", r.Offset)
				}
			case latest != nil:
				latest[string(r.Key)] = d
			default:
				if err := fn(d); err != nil {
					ferr = &fnError{err}
				}
			}
		})
		if ferr != nil {
			return read, ferr
		}
		if latest != nil && got == 0 {
			// A partition whose last offsets hold no record a consumer is
			// given (compacted away) never reaches its end offset: a probe
			// tells.
			for p := range n {
				if next[p] >= ends[p] {
					continue
				}
				done, err := lg.probe(ctx, ts, p, next[p], ends[p])
				switch {
				case errors.Is(err, errProbeOutOfRange):
					return read, fmt.Errorf("consumer/kafka: topic %s partition %d: compacted or truncated while read; reading again", l.topic, p)
				case done:
					next[p] = ends[p]
				}
			}
		}
	}
}

// decode is r's document; false for a record skipped.
func (l *DiscoveryLog) decode(r *kgo.Record) (wire.Discovery, bool) {
	if r.Value == nil {
		return wire.Discovery{}, false
	}
	var ct string
	for _, h := range r.Headers {
		if h.Key == wire.Kafka.ContentTypeHeader() {
			ct = string(h.Value)
		}
	}
	if ct != wire.DiscoveryContentType {
		l.skip(r, fmt.Errorf("content-type %q, not %s", ct, wire.DiscoveryContentType))
		return wire.Discovery{}, false
	}
	d, err := wire.UnmarshalDiscovery(r.Value)
	if err != nil {
		l.skip(r, err)
		return wire.Discovery{}, false
	}
	return d, true
}

func (l *DiscoveryLog) skip(r *kgo.Record, err error) {
	l.skipped.Add(1)
	l.log.Warn("consumer/kafka: skipped a discovery document that does not decode", "key", string(r.Key), "partition", r.Partition, "offset", r.Offset, "err", err)
}
