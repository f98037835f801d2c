package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/checkpoint"
)

// Load implements checkpoint.Store. It reads the resource's keys with one
// watch, which streams the latest value of each; it does not make a
// request per key.
func (s *Store) Load(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
	if resource == "" {
		return checkpoint.Snapshot{}, errors.New("checkpoint: nats-kv: load: empty resource name")
	}
	snap, err := s.load(ctx, resource)
	if err != nil {
		return checkpoint.Snapshot{}, fmt.Errorf("checkpoint: nats-kv: load %s from bucket %s: %w", resource, s.bucket, err)
	}
	s.mu.Lock()
	if _, ok := s.last[resource]; !ok {
		// What this store committed since the watch began is newer.
		s.last[resource] = snap.LastResourceVersion
	}
	s.mu.Unlock()
	return snap, nil
}

func (s *Store) load(ctx context.Context, resource string) (checkpoint.Snapshot, error) {
	snap := checkpoint.Snapshot{Objects: map[string]checkpoint.Position{}}
	w, err := s.kv.Watch(ctx, resourceFilter(resource), jetstream.IgnoreDeletes())
	if err != nil {
		return snap, err
	}
	defer w.Stop()
	objects := escapeKey(resource) + "." + objectsToken + "."
	last := lastRVKey(resource)
	idle := time.NewTimer(loadIdleTimeout)
	defer idle.Stop()
	var (
		old        []oldKey
		hasBounded map[string]bool
	)
	for {
		var e jetstream.KeyValueEntry
		select {
		case entry, ok := <-w.Updates():
			if !ok {
				return snap, errors.New("the watch ended early")
			}
			if entry == nil {
				// Every stored value has been read.
				if len(old) > 0 {
					s.migrate(ctx, resource, old, hasBounded)
				}
				return snap, nil
			}
			e = entry
		case <-idle.C:
			return snap, fmt.Errorf("nothing received for %s", loadIdleTimeout)
		case <-ctx.Done():
			return snap, ctx.Err()
		}
		idle.Reset(loadIdleTimeout)
		switch key := e.Key(); {
		case key == last:
			snap.LastResourceVersion = string(e.Value())
		case strings.HasPrefix(key, objects):
			k, err := unescapeKey(key[len(objects):])
			hashed := errors.Is(err, errHashedKey)
			if err != nil && !hashed {
				return snap, err
			}
			// The value is a position as every store writes it, with the
			// whole object key as well when the bucket key is bounded.
			pos, err := checkpoint.DecodePosition(e.Value())
			if err != nil {
				return snap, fmt.Errorf("key %s: %w", key, err)
			}
			if hashed {
				var v value
				if err := json.Unmarshal(e.Value(), &v); err != nil || v.Key == "" || escapeKey(v.Key) != key[len(objects):] {
					return snap, fmt.Errorf("key %s: bounded, and its value holds no object key of that key", key)
				}
				k = v.Key
				if hasBounded == nil {
					hasBounded = map[string]bool{}
				}
				hasBounded[k] = true
			} else if tok := key[len(objects):]; isOldForm(tok) {
				old = append(old, oldKey{key: key, object: k, pos: pos})
			}
			snap.Objects[k] = pos
		default:
			s.log.Warn("checkpoint: nats-kv: ignoring a key the bridge does not write", "bucket", s.bucket, "key", key)
		}
	}
}

var _ checkpoint.Lister = (*Store)(nil)

// Resources implements checkpoint.Lister: the resources with a
// LastResourceVersion in the bucket (some may hold no object now).
func (s *Store) Resources(ctx context.Context) ([]string, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, "*."+lastRVToken)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: nats-kv: list the resources of bucket %s: %w", s.bucket, err)
	}
	defer lister.Stop()
	var out []string
	for key := range lister.Keys() {
		tok, _, _ := strings.Cut(key, ".")
		res, err := unescapeKey(tok)
		if err != nil {
			continue // not a key this store wrote
		}
		out = append(out, res)
	}
	return out, nil
}
