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

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	consumerkafka "github.com/kubebus/bridge/consumer/kafka"
	consumernats "github.com/kubebus/bridge/consumer/nats"
	"github.com/kubebus/bridge/internal/httpserver"
	"github.com/kubebus/bridge/internal/replica"
	"github.com/kubebus/bridge/internal/replica/access"
	"github.com/kubebus/bridge/internal/replica/cache"
	"github.com/kubebus/bridge/internal/version"
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
	authn, err := access.NewAuthenticator(access.AuthnConfig{ClientCAFile: cfg.ClientCAFile, TokenFile: cfg.TokenFile, Logger: log})
	if err != nil {
		return fmt.Errorf("REPLICA_CLIENT_CA_FILE, REPLICA_TOKEN_FILE: %w", err)
	}
	// The rules count their denials in the server's metrics; the server,
	// made below, needs the rules. No request is served before srv is set.
	var srv *replica.Server
	rules, err := access.NewRulesFile(access.RulesFileConfig{
		Path:   cfg.RulesFile,
		Logger: log,
		OnDeny: func(cluster, resource string) { srv.Denied(cluster, resource) },
	})
	if err != nil {
		return fmt.Errorf("REPLICA_RULES_FILE: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("REPLICA_TLS_CERT_FILE, REPLICA_TLS_KEY_FILE: %w", err)
	}

	var disc consumer.DiscoveryLog
	var newLW replica.ListerWatcherFunc
	switch cfg.Bus {
	case "nats":
		nc, err := connectNATS(cfg)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("nats: %w", err)
		}
		ncfg := consumernats.Config{Stream: cfg.NATSStream, Subject: cfg.NATSSubject, SubjectPrefix: cfg.NATSSubjectPrefix}
		if disc, err = consumernats.NewDiscoveryLog(js, ncfg, log); err != nil {
			return fmt.Errorf("REPLICA_NATS_SUBJECT_PREFIX: %w", err)
		}
		newLW = func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			return consumernats.NewListerWatcher(js, ncfg, lwOptions(cluster, gr, log))
		}
	case "kafka":
		cl, err := newKafkaClient(cfg, log)
		if err != nil {
			return err
		}
		defer cl.Close()
		kcfg := consumerkafka.Config{TopicPrefix: cfg.KafkaTopicPrefix}
		if disc, err = consumerkafka.NewDiscoveryLog(cl, kcfg, log); err != nil {
			return fmt.Errorf("REPLICA_KAFKA_TOPIC_PREFIX: %w", err)
		}
		newLW = func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error) {
			return consumerkafka.NewListerWatcher(cl, kcfg, lwOptions(cluster, gr, log))
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err = replica.New(replica.Config{
		Discovery:         disc,
		NewListerWatcher:  newLW,
		Authenticator:     authn,
		Rules:             rules,
		Cache:             cache.Options{QueueLength: cfg.WatchQueue},
		MaxWatches:        cfg.MaxWatches,
		MaxWatchesPerUser: cfg.MaxWatchesPerUser,
		Logger:            log,
		Registerer:        reg,
	})
	if err != nil {
		return err
	}
	ops, err := httpserver.New(cfg.MetricsAddr, reg, srv.Ready, log)
	if err != nil {
		return fmt.Errorf("REPLICA_METRICS_ADDR: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("REPLICA_LISTEN: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if cfg.ClientCAFile != "" {
		// The authenticator verifies the certificate against the CA
		// bundle as last read, so that a new bundle needs no restart.
		tc.ClientAuth = tls.RequestClientCert
	}
	api := &http.Server{Handler: srv.Handler(), TLSConfig: tc, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 5)
	go func() { errs <- srv.Run(ctx) }()
	go func() { errs <- ops.Run(ctx) }()
	go func() { errs <- authn.Run(ctx) }()
	go func() { errs <- rules.Run(ctx) }()
	go func() {
		err := api.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errs <- err
	}()
	log.Info("replica: serving", "listen", ln.Addr().String(), "metrics", ops.Addr(), "bus", cfg.Bus)
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
