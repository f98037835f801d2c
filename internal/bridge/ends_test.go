package bridge

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/shutdown"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/natstest"
)

// A nats-kv checkpoint shares the connection of the NATS sink the bridge
// opened itself: what the store reads and writes travels on the sink's
// connection, and the store has no connection of its own to release. Next
// to a sink given with WithSink it opens its own, and nothing of the
// store's travels on the given sink's connection. release closes both
// either way.
func TestNATSKVCheckpointConnection(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	env := maps.Clone(srv.Env())
	maps.Copy(env, map[string]string{
		"BRIDGE_SINK":       "nats",
		"BRIDGE_RESOURCES":  "configmaps",
		"BRIDGE_CHECKPOINT": "nats-kv:bridge-test",
	})
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))

	for _, given := range []bool{false, true} {
		name := "opened by the bridge"
		if given {
			name = "given with WithSink"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			var opts []Option
			var givenSink *natssink.Sink
			if given {
				s, err := natssink.New(ctx, cfg.NATSSettings(), log)
				if err != nil {
					t.Fatal(err)
				}
				givenSink = s
				opts = append(opts, WithSink(s))
			}
			b := New(cfg, nil, log, append(opts, WithMetrics(metrics.New()))...)
			e, err := b.openEnds(ctx, nil, false, false)
			if err != nil {
				t.Fatal(err)
			}
			ns, ok := e.sink.(*natssink.Sink)
			if !ok {
				t.Fatalf("sink is %T, want the NATS sink", e.sink)
			}
			if given && ns != givenSink {
				t.Fatal("the given sink was not used")
			}
			before := ns.Conn().Stats().OutMsgs
			if _, err := e.store.Load(ctx, "configmaps"); err != nil {
				t.Fatal(err)
			}
			sent := ns.Conn().Stats().OutMsgs - before
			switch {
			case !given && sent == 0:
				t.Error("the store's read did not travel on the sink's connection")
			case !given && e.releaseStore != nil:
				t.Error("the store has a connection of its own to release next to the sink's")
			case given && sent != 0:
				t.Errorf("the store sent %d messages on the given sink's connection", sent)
			case given && e.releaseStore == nil:
				t.Error("the store has no connection of its own to release next to a given sink")
			}

			// The stop begins at release.
			b.release(ctx, shutdown.Watch(ctx, 20*time.Second), e)
			if !ns.Conn().IsClosed() {
				t.Error("the sink's connection is open after release")
			}
		})
	}
}
