package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/bounded"
)

// oldKey is an object's entry under a token an earlier release wrote
// whole, past maxKeyToken: one of 257 bytes up to what the server's
// control line took then (about 3,900).
type oldKey struct {
	key    string // the bucket key
	object string // the object key
	pos    checkpoint.Position
}

// isOldForm reports whether tok, the object token of a bucket key that
// unescapeKey decoded, is one an earlier release wrote whole.
func isOldForm(tok string) bool { return len(tok) > maxKeyToken }

// migrate moves the entries of old, loaded for resource, to their bounded
// keys: Commit writes and purges only the bounded key, so an entry left
// under its whole key would outlive the object's delete, and every start
// would find the object deleted while away and publish its delete again.
// hasBounded holds the object keys loaded from their bounded key as well:
// this release wrote that one since, so it is the later position, and the
// whole key is only removed.
//
// The bounded key is created only if absent (a Commit of it meanwhile
// wins), then the whole key's messages are purged from the bucket's stream
// by a purge request, whose subject filter travels in the request's body:
// the whole key never goes on a control line again. A failure is logged,
// not returned: what Load read is right either way, and the entry is tried
// again at the next start.
func (s *Store) migrate(ctx context.Context, resource string, old []oldKey, hasBounded map[string]bool) {
	for i, o := range old {
		if err := s.migrateKey(ctx, resource, o, hasBounded[o.object]); err != nil {
			s.log.Warn("checkpoint: nats-kv: could not move a key of an earlier release to its bounded key; the object's delete may be published again at the next start",
				"bucket", s.bucket, "resource", resource, "key", bounded.Abbrev(o.object), "left", len(old)-i, "err", err)
			return
		}
	}
	s.log.Info("checkpoint: nats-kv: moved keys of an earlier release to their bounded keys",
		"bucket", s.bucket, "resource", resource, "keys", len(old))
}

func (s *Store) migrateKey(ctx context.Context, resource string, o oldKey, hasBounded bool) error {
	if !hasBounded {
		v, err := json.Marshal(value{Position: o.pos, Key: o.object})
		if err != nil {
			return err
		}
		_, err = s.kv.Create(ctx, objectKey(resource, o.object), v)
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("create its bounded key: %w", err)
		}
	}
	if err := s.st.Purge(ctx, jetstream.WithPurgeSubject(s.subjects+o.key)); err != nil {
		return fmt.Errorf("purge the key of the earlier release: %w", err)
	}
	return nil
}
