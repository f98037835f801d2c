package sinktest_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// bus is one of the bridge's real sinks on a real bus, with what reads
// back what the bus holds.
type bus struct {
	name string
	open func(t *testing.T, mode string) (sink.Sink, func(context.Context) ([]sinktest.Stored, error))
}

var buses = []bus{
	{"nats", openNATS},
	{"kafka", openKafka},
}

// The bridge's sinks keep nothing of a message's bytes once Publish
// returned, in either content mode: what each bus holds is what was
// published, although the bytes were written over as soon as Publish
// returned.
func TestSinksKeepNoBytes(t *testing.T) {
	for _, b := range buses {
		for _, mode := range []string{"structured", "binary"} {
			t.Run(b.name+"/"+mode, func(t *testing.T) {
				s, read := b.open(t, mode)
				if err := sinktest.KeepsNoBytes(ctx(t), s, read); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// KeepsNoBytes finds a sink out that sends messages after its Publish
// returned: each bus, written by the bridge's sink one Publish late, holds
// poison.
func TestKeepsNoBytesFindsALateSink(t *testing.T) {
	for _, b := range buses {
		t.Run(b.name, func(t *testing.T) {
			s, read := b.open(t, "structured")
			err := sinktest.KeepsNoBytes(ctx(t), &lateSink{Sink: s}, read)
			if err == nil {
				t.Fatal("KeepsNoBytes passed a sink that sends each batch after its Publish returned")
			}
			if !strings.Contains(err.Error(), "cannot be read") && !strings.Contains(err.Error(), "differs") {
				t.Errorf("KeepsNoBytes failed for another reason than the poison on the bus: %v", err)
			}
		})
	}
}

// lateSink is a broken sink: Publish accepts a batch at once and sends it
// with the real sink only in the next Publish, or at Close, as a sink
// would whose client queues the messages' bytes and sends them after
// Publish returned.
type lateSink struct {
	sink.Sink
	mu      sync.Mutex
	pending []*wire.Message
}

func (l *lateSink) Publish(ctx context.Context, msgs []*wire.Message) error {
	l.mu.Lock()
	prev := l.pending
	l.pending = msgs
	l.mu.Unlock()
	return l.Sink.Publish(ctx, prev)
}

func (l *lateSink) Close(ctx context.Context) error {
	l.mu.Lock()
	prev := l.pending
	l.pending = nil
	l.mu.Unlock()
	if err := l.Sink.Publish(ctx, prev); err != nil {
		return err
	}
	return l.Sink.Close(ctx)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// openNATS is the NATS sink in mode, history layout, on a JetStream
// server of its own, and a reader of its stream.
func openNATS(t *testing.T, mode string) (sink.Sink, func(context.Context) ([]sinktest.Stored, error)) {
	srv := natstest.Start(t, natstest.Options{})
	vars := srv.Env()
	vars["BRIDGE_NATS_CE_MODE"] = mode
	vars["BRIDGE_NATS_LAYOUT"] = "history"
	s := bustest.NATSSink(t, vars)
	js := srv.JetStream(t)
	read := func(ctx context.Context) ([]sinktest.Stored, error) {
		stream, err := js.Stream(ctx, wire.DefaultStream)
		if err != nil {
			return nil, err
		}
		info, err := stream.Info(ctx)
		if err != nil {
			return nil, err
		}
		var out []sinktest.Stored
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			raw, err := stream.GetMsg(ctx, seq)
			if err == jetstream.ErrMsgNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			m, err := wire.NATS.Decode(raw.Data, wire.Headers(raw.Header))
			out = append(out, sinktest.Stored{Msg: m, Err: err})
		}
		return out, nil
	}
	return s, read
}

// openKafka is the Kafka sink in mode, history layout, on a cluster of its
// own, and a reader of its topic.
func openKafka(t *testing.T, mode string) (sink.Sink, func(context.Context) ([]sinktest.Stored, error)) {
	c := kafkatest.Start(t)
	s := bustest.KafkaSink(t, map[string]string{
		"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ","), "BRIDGE_KAFKA_CE_MODE": mode,
		"BRIDGE_KAFKA_LAYOUT": "history", "BRIDGE_KAFKA_TOMBSTONES": "false",
	}, sinktest.RetentionResource)
	topic := wire.TopicFor(wire.DefaultTopicPrefix, sinktest.RetentionResource.GroupResource())
	read := func(context.Context) ([]sinktest.Stored, error) {
		var out []sinktest.Stored
		for _, rec := range c.ReadAll(topic) {
			headers := map[string]string{}
			for _, h := range rec.Headers {
				headers[h.Key] = string(h.Value)
			}
			m, err := wire.Kafka.Decode(rec.Value, maps.All(headers))
			out = append(out, sinktest.Stored{Msg: m, Err: err})
		}
		return out, nil
	}
	return s, read
}
