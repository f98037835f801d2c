// Package natskv keeps the checkpoint in a NATS JetStream key-value bucket.
package natskv

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/kubebus/bridge/checkpoint"
)

// Store is a checkpoint.Store in a KV bucket. Placeholder until written.
type Store struct{}

var _ checkpoint.Store = (*Store)(nil)

// Open opens the bucket on nc, creating it when create is true and it is
// absent. Close does not close nc.
func Open(ctx context.Context, nc *nats.Conn, bucket string, create bool, log *slog.Logger) (*Store, error) {
	return nil, errors.New("checkpoint: nats-kv: not built yet")
}

func (s *Store) Load(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
	return checkpoint.Snapshot{}, nil
}
func (s *Store) Commit(ctx context.Context, records []checkpoint.Record) error { return nil }
func (s *Store) Close() error                                                  { return nil }
