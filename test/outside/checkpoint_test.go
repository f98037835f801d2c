package outside

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Every checkpoint store opens from values of the caller's own, and keeps
// what is committed across a reopen.
func TestCheckpointStores(t *testing.T) {
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	for _, tc := range []struct {
		name string
		open func(t *testing.T, ctx context.Context) func() (checkpoint.Store, error)
	}{
		{"file", func(t *testing.T, _ context.Context) func() (checkpoint.Store, error) {
			path := filepath.Join(t.TempDir(), "checkpoint.db")
			return func() (checkpoint.Store, error) { return checkpoint.OpenFile(path) }
		}},
		{"nats-kv", func(t *testing.T, ctx context.Context) func() (checkpoint.Store, error) {
			srv := natstest.Start(t, natstest.Options{Token: "kv-token"})
			cfg := nats.DefaultConfig()
			cfg.URL, cfg.Token = srv.URL(), envvar.Secret("kv-token")
			p, err := cfg.Parse()
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(ctx, p, log)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return func() (checkpoint.Store, error) {
				return natskv.Open(ctx, nc, "outside", natskv.Options{Create: true}, log)
			}
		}},
		{"kafka", func(t *testing.T, ctx context.Context) func() (checkpoint.Store, error) {
			cluster := kafkatest.Start(t, kafkatest.WithSASL("SCRAM-SHA-256", "bridge", "kafka-pass"))
			cfg := kafkaconn.DefaultConfig()
			cfg.Brokers = cluster.Addrs()
			cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword = kafkaconn.SASLScramSHA256, "bridge", envvar.Secret("kafka-pass")
			conn, err := cfg.Parse()
			if err != nil {
				t.Fatal(err)
			}
			return func() (checkpoint.Store, error) {
				return kafkastore.Open(ctx, conn, "outside.checkpoint", kafkastore.Options{CreateTopic: true}, log)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			open := tc.open(t, ctx)
			s, err := open()
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			pos := checkpoint.Position{UID: "0b3c2f9e-5d1a-4c7e-9a43-1f2e3d4c5b6a", ResourceVersion: "42"}
			if err := s.Commit(ctx, []checkpoint.Record{{Resource: "configmaps", Key: "ns/a", Position: pos}}); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = open()
			if err != nil {
				t.Fatalf("open again: %v", err)
			}
			defer s.Close()
			snap, err := s.Load(ctx, "configmaps")
			if err != nil {
				t.Fatal(err)
			}
			if got := snap.Objects["ns/a"]; got != pos || snap.LastResourceVersion != "42" || len(snap.Objects) != 1 {
				t.Errorf("loaded %+v, want ns/a at %+v and last resourceVersion 42", snap, pos)
			}
		})
	}
}

// The sinks start from configurations written here: the NATS sink makes
// its stream, the Kafka sink its topic.
func TestSinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	t.Run("nats", func(t *testing.T) {
		srv := natstest.Start(t, natstest.Options{})
		cfg := nats.DefaultConfig()
		cfg.URL, cfg.Stream = srv.URL(), "OUTSIDE"
		p, err := cfg.Parse()
		if err != nil {
			t.Fatal(err)
		}
		s, err := nats.New(ctx, p, log)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if st := natstest.StreamState(t, srv.Conn(t), "OUTSIDE"); st.Msgs != 0 {
			t.Errorf("a new stream holds %d messages", st.Msgs)
		}
	})
	t.Run("kafka", func(t *testing.T) {
		cluster := kafkatest.Start(t)
		cfg := kafka.DefaultConfig()
		cfg.Brokers, cfg.TopicPrefix = cluster.Addrs(), "outside"
		p, err := cfg.Parse()
		if err != nil {
			t.Fatal(err)
		}
		configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		s, err := kafka.New(ctx, p, []schema.GroupVersionResource{configmaps}, kafka.Options{}, log)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if got := cluster.TopicConfig("outside.configmaps", "cleanup.policy"); got != "compact" {
			t.Errorf("the sink's topic has cleanup.policy=%q, want compact (the state layout)", got)
		}
	})
}
