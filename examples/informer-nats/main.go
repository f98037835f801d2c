// Command informer-nats runs a client-go SharedIndexInformer on Pods from
// the bridge's NATS JetStream stream, with no access to the API server. It
// counts Pods by namespace and phase with an event handler, prints a line
// when a Pod changes phase, and a summary whenever the counts changed:
//
//	synced at bus position n1.74c72f77.1795449189673556921.4182.1795449189691
//	3 pods in 2 namespaces
//	  team-a: Pending=1 Running=1
//	  team-b: Succeeded=1
//	team-a/db: Pending -> Running (API resourceVersion 48213)
//
// The stream must hold the state (the bridge's BRIDGE_NATS_LAYOUT=state,
// the default): the informer reads every live Pod from it at start, then
// follows the changes. Stop it and start it again, and it reads the state
// anew; the bridge and the API server are not involved.
//
//	go run ./examples/informer-nats -url nats://127.0.0.1:4222 -cluster prod
//
// -stream, -subject and -prefix must match the bridge's BRIDGE_NATS_STREAM,
// BRIDGE_NATS_SUBJECT and BRIDGE_NATS_SUBJECT_PREFIX when those are set.
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	consumernats "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/examples/internal/cli"
	"github.com/kubebus/bridge/examples/internal/podphases"
)

// options say where to read from.
type options struct {
	url, creds              string
	stream, subject, prefix string
	cluster, namespace      string
	interval                time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL), "NATS server URLs, comma-separated (env NATS_URL)")
	flag.StringVar(&o.creds, "creds", os.Getenv("NATS_CREDS"), "credentials file, if the server needs one (env NATS_CREDS)")
	flag.StringVar(&o.stream, "stream", "", "the bridge's stream, BRIDGE_NATS_STREAM (default KUBE)")
	flag.StringVar(&o.subject, "subject", "", "the bridge's BRIDGE_NATS_SUBJECT, if it sets one")
	flag.StringVar(&o.prefix, "prefix", "", "the bridge's BRIDGE_NATS_SUBJECT_PREFIX (default kube)")
	flag.StringVar(&o.cluster, "cluster", os.Getenv("BRIDGE_CLUSTER_NAME"), "the bridge's BRIDGE_CLUSTER_NAME (env BRIDGE_CLUSTER_NAME)")
	flag.StringVar(&o.namespace, "namespace", "", "only this namespace; all when empty")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "how often to print the summary, when it changed")
	flag.Parse()

	cli.Main("informer-nats", func(ctx context.Context, out io.Writer, log *slog.Logger) error {
		return run(ctx, o, out, log)
	})
}

// run reads the Pods of the stream until ctx ends.
func run(ctx context.Context, o options, out io.Writer, log *slog.Logger) error {
	if o.cluster == "" {
		return fmt.Errorf("informer-nats: -cluster is required: the bridge's BRIDGE_CLUSTER_NAME")
	}
	nc, err := cli.ConnectNATS(o.url, o.creds, "informer-nats-example")
	if err != nil {
		return fmt.Errorf("informer-nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	lw, err := consumernats.NewListerWatcher(js,
		consumernats.Config{Stream: o.stream, Subject: o.subject, SubjectPrefix: o.prefix},
		podphases.Options(o.cluster, o.namespace, "informer-nats-example", log))
	if err != nil {
		return err
	}
	defer lw.Close()
	return podphases.Watch(ctx, lw, o.interval, out)
}
