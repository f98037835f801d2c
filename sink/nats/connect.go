package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	// clientName names the bridge's connections in the server's monitoring.
	clientName = "kubebus-bridge"
	// pingInterval and maxPingsOut notice a server that vanished without
	// closing the connection within about a minute, not the library's
	// default of four.
	pingInterval = 20 * time.Second
	maxPingsOut  = 3
	// drainTimeout bounds the drain of Close when its context allows more.
	drainTimeout = 10 * time.Second
	// reconnectInitialWait is the first wait of a reconnect backoff, once
	// every server has been tried.
	reconnectInitialWait = 250 * time.Millisecond
)

// Connect opens a connection configured like the sink's: the servers,
// credentials and TLS of cfg, reconnecting forever with backoff once it is
// established. It fails when no server can be reached at first, so that a
// wrong address or credentials is a clear error at start-up. The caller
// closes the connection. cfg is what Config.Parse returned.
func Connect(ctx context.Context, cfg *Parsed, log *slog.Logger) (*nats.Conn, error) {
	nc, _, err := connect(ctx, cfg, log)
	return nc, err
}

// connect is Connect that also returns a channel closed once the
// connection is closed.
func connect(ctx context.Context, cfg *Parsed, log *slog.Logger) (*nats.Conn, <-chan struct{}, error) {
	if cfg == nil || len(cfg.servers) == 0 {
		return nil, nil, errors.New("nats sink: settings not made by Config.Parse")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	where := cfg.redactedURL()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("nats sink: connect to %s: %w", where, err)
	}
	closed := make(chan struct{})
	nc, err := nats.Connect(cfg.serverList(), cfg.options(log, closed)...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats sink: connect to %s: %w", where, scrub(err, cfg.secrets()))
	}
	js, _ := nc.ConnectedServerJetStream()
	log.Info("nats: connected", "url", connectedURL(nc), "server", nc.ConnectedServerName(),
		"version", nc.ConnectedServerVersion(), "jetstream", js)
	return nc, closed, nil
}

// options turns the configuration into nats.go options.
func (c *Parsed) options(log *slog.Logger, closed chan struct{}) []nats.Option {
	delay := &reconnectDelay{max: c.ReconnectMaxWait}
	secrets := c.secrets()
	opts := []nats.Option{
		nats.Name(clientName),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(delay.next),
		// Authentication failures during an outage (a server restarting
		// with its accounts not loaded yet) must not end the retries.
		nats.IgnoreAuthErrorAbort(),
		// Publishing while disconnected fails at once instead of filling
		// a buffer: the pipeline retries with its own backoff, and no
		// message is counted as sent before the server has it.
		nats.ReconnectBufSize(-1),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
		nats.DrainTimeout(drainTimeout),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats: disconnected; reconnecting", "err", scrub(err, secrets))
			} else {
				log.Info("nats: disconnected")
			}
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("nats: reconnect attempt failed", "err", scrub(err, secrets))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			delay.reset()
			log.Info("nats: reconnected", "url", connectedURL(nc), "server", nc.ConnectedServerName())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			log.Info("nats: connection closed")
			close(closed)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats: asynchronous error", "subject", subject, "err", scrub(err, secrets))
		}),
	}
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, string(c.Password)))
	case c.Token != "":
		opts = append(opts, nats.Token(string(c.Token)))
	case c.nkey != nil:
		opts = append(opts, c.nkey)
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.tls != nil {
		opts = append(opts, nats.Secure(c.tls))
		// Parse read the files to report their problems at start-up; these
		// have nats.go read them again at every connect, so that
		// certificates renewed on disk are taken up at the next reconnect.
		if c.TLSFiles.CAFile != "" {
			opts = append(opts, nats.RootCAs(c.TLSFiles.CAFile))
		}
		if c.TLSFiles.CertFile != "" {
			opts = append(opts, nats.ClientCert(c.TLSFiles.CertFile, c.TLSFiles.KeyFile))
		}
	}
	return opts
}

// connectedURL is the URL of the server nc is connected to, for logs.
// nats.go's ConnectedUrlRedacted hides a password but not a token given
// as nats://TOKEN@host.
func connectedURL(nc *nats.Conn) string {
	u, err := url.Parse(nc.ConnectedUrl())
	if err != nil {
		return nc.ConnectedAddr()
	}
	return redact(u)
}
