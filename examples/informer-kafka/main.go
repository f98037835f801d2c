// Command informer-kafka runs a client-go SharedIndexInformer on Pods from
// the bridge's Kafka topic, with no access to the API server. It counts
// Pods by namespace and phase with an event handler, prints a line when a
// Pod changes phase, and a summary whenever the counts changed:
//
//	synced at bus position k1.8d4aa7cd6eb915f9.1795449189085.112.98.140
//	3 pods in 2 namespaces
//	  team-a: Pending=1 Running=1
//	  team-b: Succeeded=1
//	team-a/db: Pending -> Running (API resourceVersion 48213)
//
// The topic must hold the state (the bridge's BRIDGE_KAFKA_LAYOUT=state,
// the default, which creates it compacted): the informer reads every live
// Pod from it at start, then follows the changes. Its resourceVersions are
// the offsets of all the topic's partitions.
//
//	go run ./examples/informer-kafka -brokers localhost:9092 -cluster prod
//
// -topic or -prefix must match the bridge's topic (BRIDGE_KAFKA_TOPIC_PREFIX,
// default kube: the topic kube.pods). TLS and SASL are kgo options on the
// client; add them where the client is made.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	consumerkafka "github.com/kubebus/bridge/consumer/kafka"
	"github.com/kubebus/bridge/examples/internal/cli"
	"github.com/kubebus/bridge/examples/internal/podphases"
)

// options say where to read from.
type options struct {
	brokers            []string
	topic, prefix      string
	cluster, namespace string
	interval           time.Duration
}

func main() {
	var (
		o       options
		brokers string
	)
	flag.StringVar(&brokers, "brokers", cmp.Or(os.Getenv("BRIDGE_KAFKA_BROKERS"), "localhost:9092"), "comma-separated bootstrap brokers (env BRIDGE_KAFKA_BROKERS)")
	flag.StringVar(&o.topic, "topic", "", "the topic; default: the bridge's topic for pods under -prefix")
	flag.StringVar(&o.prefix, "prefix", os.Getenv("BRIDGE_KAFKA_TOPIC_PREFIX"), "the bridge's BRIDGE_KAFKA_TOPIC_PREFIX (default kube)")
	flag.StringVar(&o.cluster, "cluster", os.Getenv("BRIDGE_CLUSTER_NAME"), "the bridge's BRIDGE_CLUSTER_NAME (env BRIDGE_CLUSTER_NAME)")
	flag.StringVar(&o.namespace, "namespace", "", "only this namespace; all when empty")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "how often to print the summary, when it changed")
	flag.Parse()
	o.brokers = cli.Split(brokers)

	cli.Main("informer-kafka", func(ctx context.Context, out io.Writer, log *slog.Logger) error {
		return run(ctx, o, out, log)
	})
}

// run reads the Pods of the topic until ctx ends.
func run(ctx context.Context, o options, out io.Writer, log *slog.Logger) error {
	if o.cluster == "" {
		return fmt.Errorf("informer-kafka: -cluster is required: the bridge's BRIDGE_CLUSTER_NAME")
	}
	if len(o.brokers) == 0 {
		return fmt.Errorf("informer-kafka: -brokers is empty")
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...), kgo.ClientID("informer-kafka-example"))
	if err != nil {
		return fmt.Errorf("informer-kafka: %w", err)
	}
	defer client.Close()

	lw, err := consumerkafka.NewListerWatcher(client,
		consumerkafka.Config{Topic: o.topic, TopicPrefix: o.prefix},
		podphases.Options(o.cluster, o.namespace, "informer-kafka-example", log))
	if err != nil {
		return err
	}
	defer lw.Close()
	return podphases.Watch(ctx, lw, o.interval, out)
}
