// Command kafka-consumer reads the bridge's Kafka topics in a consumer
// group and keeps a live map of the objects they describe, printing one
// line per change and the number of live objects.
//
//	go run ./examples/kafka-consumer -brokers localhost:9092 -resources configmaps,deployments.apps
//
// Topics are named like the bridge names them (-prefix, default kube), or
// given with -topics. Several copies with the same -group share the
// partitions. TLS and SASL are read from the bridge's own BRIDGE_KAFKA_*
// variables. The map lives in memory, so by default the consumer commits no
// offsets and reads the topics from the start each time it starts; -commit
// makes it resume instead, which suits a consumer that keeps its state
// elsewhere.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/caarlos0/env/v11"
	kafkago "github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/wire"
)

// options are the consumer's settings.
type options struct {
	brokers   []string
	topics    []string
	group     string
	commit    bool
	kafka     kafka.Config // TLS and SASL
	maxEvents int          // stop after this many changes; 0 runs until stopped
}

func main() {
	var (
		o                                  options
		brokers, topics, prefix, resources string
	)
	flag.StringVar(&brokers, "brokers", cmp.Or(os.Getenv("BRIDGE_KAFKA_BROKERS"), "localhost:9092"), "comma-separated bootstrap brokers; $BRIDGE_KAFKA_BROKERS when set")
	flag.StringVar(&topics, "topics", "", "comma-separated topics; overrides -prefix and -resources")
	flag.StringVar(&prefix, "prefix", cmp.Or(os.Getenv("BRIDGE_KAFKA_TOPIC_PREFIX"), wire.DefaultTopicPrefix), "topic prefix, as BRIDGE_KAFKA_TOPIC_PREFIX")
	flag.StringVar(&resources, "resources", "configmaps", "comma-separated resources, as BRIDGE_RESOURCES names them (configmaps, deployments.apps)")
	flag.StringVar(&o.group, "group", "kubebus-example", "consumer group")
	flag.BoolVar(&o.commit, "commit", false, "commit offsets, so that a restart resumes instead of reading from the start")
	flag.Parse()

	o.brokers = split(brokers)
	o.topics = split(topics)
	if len(o.topics) == 0 {
		for _, r := range split(resources) {
			gr := schema.ParseGroupResource(r)
			o.topics = append(o.topics, wire.TopicFor(prefix, gr))
		}
	}
	if err := env.Parse(&o.kafka); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-consumer:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "kafka-consumer:", err)
		os.Exit(1)
	}
}

// run consumes until ctx ends (or o.maxEvents changes were printed).
func run(ctx context.Context, o options, out io.Writer) error {
	// Only the connection's variables matter here, not the sink's.
	cfg := o.kafka.Config
	cfg.Brokers = o.brokers
	conn, err := cfg.Parse()
	if err != nil {
		return err
	}
	dialer := conn.Dialer()
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:     o.brokers,
		GroupID:     o.group,
		GroupTopics: o.topics,
		Dialer:      dialer,
		StartOffset: kafkago.FirstOffset, // where the group has committed nothing
		// How long a fetch waits for new records; Close waits for it too.
		MaxWait: time.Second,
	})
	defer r.Close()
	fmt.Fprintf(out, "reading %s in group %s\n", strings.Join(o.topics, ", "), o.group)

	objects := NewObjects()
	changes := 0
	for o.maxEvents == 0 || changes < o.maxEvents {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return err
		}
		headers := make(map[string]string, len(m.Headers))
		for _, h := range m.Headers {
			headers[h.Key] = string(h.Value)
		}
		line, err := objects.Apply(m.Topic, string(m.Key), m.Value, headers)
		if err != nil {
			// Not the bridge's record: report it and go on.
			fmt.Fprintf(out, "skipped  %s[%d]@%d: %v\n", m.Topic, m.Partition, m.Offset, err)
		} else if line != "" {
			changes++
			fmt.Fprintf(out, "%s  (%d objects)\n", line, objects.Len())
		}
		if o.commit {
			if err := r.CommitMessages(ctx, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func split(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
