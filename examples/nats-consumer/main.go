// Command nats-consumer reads the bridge's JetStream stream with a durable
// consumer and prints one line per change:
//
//	updated  team-a/web  rv=48213  snapshot=false  kube.prod.apps.deployments.team-a.web
//
// It acknowledges each message after printing it, so a second run with the
// same -durable name starts where the first stopped. It reads both
// CloudEvents content modes. On a stream of the state layout (the
// bridge's default) a first run prints each object's latest change, then
// what follows; on one of the history layout, every change the stream
// still holds (subjects there carry the version: kube.prod.apps.v1...).
//
//	go run ./examples/nats-consumer -url nats://127.0.0.1:4222 -stream KUBE \
//	    -durable my-app -filter 'kube.prod.apps.deployments.team-a.>'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kubebus/bridge/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// options say where to read from.
type options struct {
	url, creds, stream, durable, filter string
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", getenv("NATS_URL", nats.DefaultURL), "NATS server URLs, comma-separated (env NATS_URL)")
	flag.StringVar(&o.creds, "creds", os.Getenv("NATS_CREDS"), "credentials file, if the server needs one (env NATS_CREDS)")
	flag.StringVar(&o.stream, "stream", getenv("NATS_STREAM", "KUBE"), "stream the bridge publishes to (env NATS_STREAM)")
	flag.StringVar(&o.durable, "durable", getenv("NATS_DURABLE", "nats-consumer-example"), "durable consumer name; a second run resumes it (env NATS_DURABLE)")
	flag.StringVar(&o.filter, "filter", getenv("NATS_FILTER", "kube.>"), "subject filter, such as kube.prod.apps.deployments.team-a.> (env NATS_FILTER)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run prints the changes of the stream until ctx ends.
func run(ctx context.Context, o options, out io.Writer) error {
	opts := []nats.Option{nats.Name("nats-consumer-example"), nats.MaxReconnects(-1)}
	if o.creds != "" {
		opts = append(opts, nats.UserCredentials(o.creds))
	}
	nc, err := nats.Connect(o.url, opts...)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		_ = nc.Flush() // the server has every ack before the connection closes
		nc.Close()
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, o.stream, jetstream.ConsumerConfig{
		Durable:       o.durable,
		FilterSubject: o.filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		// Redeliver a message not acknowledged within this time.
		AckWait: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on stream %s: %w", o.durable, o.stream, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		msgs.Stop()
	}()
	for {
		m, err := msgs.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		ev, err := wire.NATS.Decode(m.Data(), wire.Headers(m.Headers()))
		if err != nil {
			// Not an event the bridge wrote: say so, and do not see it again.
			fmt.Fprintf(out, "skipped  %s: %v\n", m.Subject(), err)
			_ = m.Term()
			continue
		}
		fmt.Fprintf(out, "%-8s %s  rv=%s  snapshot=%t  %s\n", ev.Action, ev.Key(), ev.ResourceVersion, ev.Snapshot, m.Subject())
		if err := m.Ack(); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
}
