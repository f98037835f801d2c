package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/bounded"
)

// Headers of a purge, as the KV API writes them.
const (
	kvOperationHeader = "KV-Operation"
	kvPurge           = "PURGE"
)

// Commit implements checkpoint.Store. It publishes every record, and the
// LastResourceVersion of each resource it touches, asynchronously and in
// order, then waits for every ack; it returns nil only when all were
// stored. It is not atomic: see the package documentation for why a
// partial Commit is safe. LastResourceVersion never moves back.
func (s *Store) Commit(ctx context.Context, records []checkpoint.Record) error {
	if len(records) == 0 {
		return nil
	}
	for i, r := range records {
		switch {
		case r.Resource == "":
			return fmt.Errorf("checkpoint: nats-kv: record %d (key %q): empty resource name", i, r.Key)
		case r.Key == "":
			return fmt.Errorf("checkpoint: nats-kv: record %d (resource %q): empty key", i, r.Resource)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: nats-kv: commit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if err := s.commit(ctx, records); err != nil {
		return fmt.Errorf("checkpoint: nats-kv: commit %d records to bucket %s: %w", len(records), s.bucket, err)
	}
	return nil
}

// put is one message of a Commit.
type put struct {
	msg   *nats.Msg
	purge bool
	// rec is the record the message stores; nil for a LastResourceVersion.
	rec *checkpoint.Record
}

func (s *Store) commit(ctx context.Context, records []checkpoint.Record) error {
	last := map[string]string{}
	var order []string // resources in the order first seen
	puts := make([]put, 0, len(records)+1)
	for i, r := range records {
		cur, seen := last[r.Resource]
		if !seen {
			var err error
			if cur, err = s.lastResourceVersion(ctx, r.Resource); err != nil {
				return err
			}
			order = append(order, r.Resource)
		}
		last[r.Resource] = checkpoint.LaterResourceVersion(cur, r.ResourceVersion)

		tok := escapeKey(r.Key)
		m := nats.NewMsg(s.subjects + escapeKey(r.Resource) + "." + objectsToken + "." + tok)
		if r.Deleted {
			m.Header.Set(kvOperationHeader, kvPurge)
			m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		} else {
			val := value{Position: r.Position}
			if isBounded(tok) {
				val.Key = r.Key
			}
			v, err := json.Marshal(val)
			if err != nil {
				return fmt.Errorf("%s %q: %w", r.Resource, r.Key, err)
			}
			m.Data = v
		}
		puts = append(puts, put{msg: m, purge: r.Deleted, rec: &records[i]})
	}
	for _, resource := range order {
		if rv := last[resource]; rv != "" && rv != s.last[resource] {
			m := nats.NewMsg(s.subjects + lastRVKey(resource))
			m.Data = []byte(rv)
			puts = append(puts, put{msg: m})
		}
	}
	if err := s.publish(ctx, puts); err != nil {
		return err
	}
	for resource, rv := range last {
		s.last[resource] = rv
	}
	return nil
}

// lastResourceVersion is the stored LastResourceVersion of resource: from
// memory when this Store loaded or committed it, else from the bucket.
func (s *Store) lastResourceVersion(ctx context.Context, resource string) (string, error) {
	if rv, ok := s.last[resource]; ok {
		return rv, nil
	}
	e, err := s.kv.Get(ctx, lastRVKey(resource))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		s.last[resource] = ""
		return "", nil
	case err != nil:
		return "", fmt.Errorf("%s: last resource version: %w", resource, err)
	}
	s.last[resource] = string(e.Value())
	return s.last[resource], nil
}

// publish sends puts in order, at most maxInFlight awaiting their acks,
// and waits for every ack. Once a put fails to be sent, the rest are not.
// A record larger than the server or the bucket takes is dropped (see
// drop) and the others go on.
func (s *Store) publish(ctx context.Context, puts []put) error {
	type pendingPut struct {
		f jetstream.PubAckFuture
		p put
	}
	var (
		pending []pendingPut
		failed  int
		first   error
	)
	fail := func(err error) {
		if failed++; first == nil {
			first = err
		}
	}
	wait := func(pp pendingPut) {
		select {
		case <-pp.f.Ok():
		case err := <-pp.f.Err():
			if !s.drop(pp.p, err) {
				fail(fmt.Errorf("%s: %w", pp.f.Msg().Subject, err))
			}
		case <-ctx.Done():
			fail(ctx.Err())
		}
	}
	for i, p := range puts {
		if first != nil {
			failed += len(puts) - i
			break
		}
		if len(pending) == maxInFlight {
			wait(pending[0])
			pending = pending[1:]
		}
		opts := []jetstream.PublishOpt{jetstream.WithExpectStream(s.stream)}
		if p.purge && s.markerTTL > 0 {
			opts = append(opts, jetstream.WithMsgTTL(s.markerTTL))
		}
		f, err := s.js.PublishMsgAsync(p.msg, opts...)
		if errors.Is(err, nats.ErrReconnectBufExceeded) {
			// What nats.go says when publishing while disconnected, with
			// the reconnect buffer off.
			err = fmt.Errorf("not connected, reconnecting: %w", err)
		}
		if err != nil {
			if !s.drop(p, err) {
				fail(fmt.Errorf("%s: %w", p.msg.Subject, err))
			}
			continue
		}
		pending = append(pending, pendingPut{f, p})
	}
	for _, f := range pending {
		wait(f)
	}
	if first != nil {
		return fmt.Errorf("%d of %d writes failed: %w", failed, len(puts), first)
	}
	return nil
}

// drop reports whether err says that p's record can never be stored,
// because its message is larger than the server (max_payload) or the
// bucket takes, and then logs that it is left out. Only an object key of
// tens of kilobytes makes a record that large, and such an object's
// events, which carry its name at least twice, are larger than the same
// server takes as well: none of them is ever delivered, so there is no
// position to keep. Failing the Commit instead would fail every flush
// from then on, and stop the stream. A restart finds the object missing
// from the checkpoint and tries to publish it again.
func (s *Store) drop(p put, err error) bool {
	if p.rec == nil || !(errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum)) {
		return false
	}
	s.log.Warn("checkpoint: nats-kv: record too large for the bucket; left out, as the object's events cannot be published either",
		"bucket", s.bucket, "resource", p.rec.Resource, "key", bounded.Abbrev(p.rec.Key), "uid", p.rec.UID,
		"resourceVersion", p.rec.ResourceVersion, "bytes", len(p.msg.Data), "err", err)
	s.dropped(p.rec.Resource)
	return true
}
