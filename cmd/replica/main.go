// Command replica serves a read-only Kubernetes API of every cluster whose
// bridge publishes to a bus in the state layout: /clusters/<name>/... for
// one cluster, /clusters/*/... for all of them. It is configured only
// through environment variables; run `replica --help` for the list, and
// see docs/replica.md.
//
// Exit codes: 0 after a clean shutdown (SIGTERM, SIGINT), 1 on a runtime
// failure, 2 when the configuration is invalid (every problem is
// reported, by variable name).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	consumerkafka "github.com/kubebus/bridge/consumer/kafka"
	consumernats "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/internal/httpserver"
	"github.com/kubebus/bridge/internal/replica"
	"github.com/kubebus/bridge/internal/replica/cache"
	"github.com/kubebus/bridge/internal/version"
	"github.com/kubebus/bridge/wire"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stderr))
}

func run(args, environ []string, stderr io.Writer) int {
	for _, a := range args {
		switch a {
		case "-version", "--version", "version":
			fmt.Fprintln(stderr, "replica", version.Read())
			return 0
		case "-h", "-help", "--help", "help":
			fmt.Fprintln(stderr, "replica serves a read-only Kubernetes API of every cluster on the bus.")
			fmt.Fprintln(stderr, "It is configured only through environment variables:")
			fmt.Fprintln(stderr)
			_ = help(stderr)
			return 0
		default:
			fmt.Fprintf(stderr, "replica: unknown argument %q; it is configured through environment variables (see --help)\n", a)
			return 2
		}
	}
	cfg, err := parseConfig(environ)
	if err != nil {
		fmt.Fprintln(stderr, "replica: invalid configuration:")
		for _, e := range splitErr(err) {
			fmt.Fprintln(stderr, "  "+e.Error())
		}
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("replica: stopped", "err", err)
		return 1
	}
	log.Info("replica: stopped")
	return 0
}

func splitErr(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return []error{err}
}

// serve runs the replica until ctx ends.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	authn, clientCAs, err := newAuthenticator(cfg.ClientCAFile, cfg.TokenFile)
	if err != nil {
		return err
	}
	authz, err := loadRules(cfg.RulesFile)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("REPLICA_TLS_CERT_FILE, REPLICA_TLS_KEY_FILE: %w", err)
	}

	var disc consumer.DiscoveryLog
	var newLW replica.ListerWatcherFunc
	switch cfg.Bus {
	case "nats":
		nc, err := nats.Connect(cfg.NATSURL, nats.Name("kubebus-replica"), nats.MaxReconnects(-1))
		if err != nil {
			return fmt.Errorf("REPLICA_NATS_URL: %w", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("nats: %w", err)
		}
		ncfg := consumernats.Config{Stream: cfg.NATSStream, Subject: cfg.NATSSubject, SubjectPrefix: cfg.NATSSubjectPrefix}
		disc = &natsDiscovery{js: js, stream: cfg.NATSStream, prefix: cfg.NATSSubjectPrefix, log: log}
		newLW = func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			return consumernats.NewListerWatcher(js, ncfg, lwOptions(cluster, gr, log))
		}
	case "kafka":
		cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.KafkaBrokers...))
		if err != nil {
			return fmt.Errorf("REPLICA_KAFKA_BROKERS: %w", err)
		}
		defer cl.Close()
		kcfg := consumerkafka.Config{TopicPrefix: cfg.KafkaTopicPrefix}
		disc = &kafkaDiscovery{brokers: cfg.KafkaBrokers, topic: wire.DiscoveryTopic(cfg.KafkaTopicPrefix), log: log}
		newLW = func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			return consumerkafka.NewListerWatcher(cl, kcfg, lwOptions(cluster, gr, log))
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := replica.New(replica.Config{
		Discovery:        disc,
		NewListerWatcher: newLW,
		Authenticator:    authn,
		Authorizer:       authz,
		Cache:            cache.Options{QueueLength: cfg.WatchQueue},
		Logger:           log,
		Registerer:       reg,
	})
	if err != nil {
		return err
	}
	ops, err := httpserver.New(cfg.MetricsAddr, reg, func() error { return nil }, log)
	if err != nil {
		return fmt.Errorf("REPLICA_METRICS_ADDR: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("REPLICA_LISTEN: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if clientCAs != nil {
		tc.ClientCAs = clientCAs
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	api := &http.Server{Handler: srv.Handler(), TLSConfig: tc, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	go func() { errs <- srv.Run(ctx) }()
	go func() { errs <- ops.Run(ctx) }()
	go func() {
		err := api.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errs <- err
	}()
	log.Info("replica: ready", "listen", ln.Addr().String(), "metrics", ops.Addr(), "bus", cfg.Bus)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = api.Shutdown(sctx)
	_ = api.Close()
	if first != nil && !errors.Is(first, context.Canceled) {
		return first
	}
	return nil
}

// lwOptions are the consumer options of one cache.
func lwOptions(cluster string, gr schema.GroupResource, log *slog.Logger) consumer.Options {
	return consumer.Options{Cluster: cluster, Resource: gr, Name: cluster + "/" + gr.String(), Logger: log}
}
