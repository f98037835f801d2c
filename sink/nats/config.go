package nats

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/kubebus/bridge/sink"
)

// Config is the NATS sink's part of the bridge configuration, read from
// BRIDGE_NATS_* variables. Each field's env tag names its variable,
// envDefault gives its default and help its meaning for `bridge --help`.
type Config struct {
	// CreateStream placeholder.
	CreateStream bool
}

// Validate reports every problem, joined; each error starts with the name
// of the variable at fault ("BRIDGE_NATS_URL: ...").
func (c *Config) Validate() error { return nil }

// The rest of this file is a placeholder until the sink is written.

// Sink publishes to NATS.
type Sink struct{}

// New connects to NATS and, in JetStream mode, checks (or creates) the
// stream.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Sink, error) {
	return nil, errors.New("nats sink: not built yet")
}

// Conn is the sink's connection, for a checkpoint kept in the same NATS.
func (s *Sink) Conn() *nats.Conn { return nil }

// Connect opens a connection configured like the sink's.
func Connect(ctx context.Context, cfg Config, log *slog.Logger) (*nats.Conn, error) {
	return nil, errors.New("nats: not built yet")
}

func (s *Sink) Publish(ctx context.Context, msgs []*sink.Message) error { return nil }
func (s *Sink) Close() error                                            { return nil }
