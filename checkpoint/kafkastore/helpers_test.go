package kafkastore

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/kafkatest"
)

var topics atomic.Int64

// newTopic names a topic no other test uses.
func newTopic() string { return fmt.Sprintf("checkpoint-%d", topics.Add(1)) }

// config is the default configuration for c's brokers, with vars on top.
func config(t *testing.T, c *kafkatest.Cluster, vars map[string]string) kafka.Config {
	t.Helper()
	all := map[string]string{"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ",")}
	maps.Copy(all, vars)
	var cfg kafka.Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: all}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// openStore parses cfg and opens the store on topic with it, as the
// bridge does; dropped, when given, is Options.Dropped.
func openStore(ctx context.Context, t *testing.T, cfg kafka.Config, topic string, dropped ...func(resource string)) (*Store, error) {
	t.Helper()
	set, err := cfg.Parse()
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	opts := Options{CreateTopic: set.CreateTopics, ReplicationFactor: set.ReplicationFactor, MaxMessageBytes: set.MaxMessageBytes, BatchTimeout: set.BatchTimeout}
	for _, f := range dropped {
		opts.Dropped = f
	}
	return Open(ctx, set.Conn(), topic, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
}

// open opens the store on topic and closes it when the test ends.
func open(t *testing.T, cfg kafka.Config, topic string, dropped ...func(resource string)) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := openStore(ctx, t, cfg, topic, dropped...)
	if err != nil {
		t.Fatalf("Open(%s): %v", topic, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func commit(t *testing.T, s *Store, recs ...checkpoint.Record) {
	t.Helper()
	if err := s.Commit(t.Context(), recs); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func load(t *testing.T, s *Store, resource string) checkpoint.Snapshot {
	t.Helper()
	snap, err := s.Load(t.Context(), resource)
	if err != nil {
		t.Fatalf("Load(%s): %v", resource, err)
	}
	if snap.Objects == nil {
		t.Fatalf("Load(%s): nil Objects", resource)
	}
	return snap
}

func assertSnapshot(t *testing.T, what string, got, want checkpoint.Snapshot) {
	t.Helper()
	if want.Objects == nil {
		want.Objects = map[string]checkpoint.Position{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func put(resource, key, uid, rv string) checkpoint.Record {
	return checkpoint.Record{Resource: resource, Key: key, Position: checkpoint.Position{UID: uid, ResourceVersion: rv}}
}

func del(resource, key, uid, rv string) checkpoint.Record {
	r := put(resource, key, uid, rv)
	r.Deleted = true
	return r
}
