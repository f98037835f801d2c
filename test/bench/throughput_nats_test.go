package bench

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/internal/config"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// natsBus is NATS JetStream on an embedded server with file storage.
type natsBus struct {
	msgs []*nats.Msg // what the sink publishes for the workload
}

func (*natsBus) Name() string { return "NATS JetStream" }

func (*natsBus) BaselineName() string { return "nats.go async publish" }

func (*natsBus) Settings() string {
	return "embedded nats-server, file storage, the stream the bridge creates, every PubAck awaited, " +
		"at most 2048 publishes awaiting their acks on either side (BRIDGE_NATS_MAX_IN_FLIGHT); " +
		"bridge: its defaults (4 workers, batches of 500, structured mode), checkpoint in a bbolt file, its flush of the run's positions inside the measured window; " +
		"baseline: one goroutine publishing the bridge's messages (subject, headers, body) with PublishMsgAsync, then awaiting every ack"
}

// natsConfig is the bridge's configuration for srv.
func natsConfig(b *testing.B, srv *natstest.Server) *config.Config {
	return loadConfig(b, map[string]string{"BRIDGE_SINK": "nats", "BRIDGE_NATS_URL": srv.URL()})
}

// newNATSSink opens the bridge's sink on srv, which creates the stream.
func newNATSSink(b *testing.B, cfg *config.Config) *natssink.Sink {
	b.Helper()
	s, err := natssink.New(context.Background(), cfg.NATSSettings(), benchLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// Prepare builds the messages the sink publishes for wl: the subject of
// the configured layout, the sink's headers and the event as the body.
// They do not depend on the server's address.
func (nb *natsBus) Prepare(b *testing.B, wl *workload) {
	b.Helper()
	cfg := loadConfig(b, map[string]string{"BRIDGE_SINK": "nats"}).NATS
	tmpl, err := wire.ParseSubjectTemplate(cfg.SubjectLayout(), cfg.SubjectPrefix)
	if err != nil {
		b.Fatal(err)
	}
	nb.msgs = make([]*nats.Msg, len(wl.msgs))
	for i, m := range wl.msgs {
		subject, err := tmpl.Subject(m)
		if err != nil {
			b.Fatal(err)
		}
		nm := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: wl.bodies[i]}
		nm.Header.Set(wire.NATSMsgIDHeader, m.ID)
		nm.Header.Set(wire.NATSContentTypeHeader, wire.StructuredContentType)
		nm.Header.Set(jetstream.ExpectedStreamHeader, cfg.Stream)
		// The state layout's identity headers, which let the bridge read
		// what the stream holds with headers only.
		nm.Header.Set("ce-uid", m.UID)
		nm.Header.Set("ce-resourceversion", m.ResourceVersion)
		nb.msgs[i] = nm
	}
}

func (nb *natsBus) Bridge(b *testing.B, wl *workload, verify bool) runResult {
	b.Helper()
	srv := natstest.Start(b, natstest.Options{})
	defer srv.Shutdown()
	cfg := natsConfig(b, srv)
	s := newNATSSink(b, cfg)
	r := runPipeline(b, cfg, s, wl.deltas, wl.via)
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	st := natsStream(b, srv, cfg, len(nb.msgs))
	if verify {
		nb.check(b, st, wl.via != nil)
	}
	return r
}

// Baseline publishes the prepared messages with nats.go's asynchronous
// JetStream publish, as many awaiting acks at once as the bridge allows,
// and measures until every ack arrived.
func (nb *natsBus) Baseline(b *testing.B, _ *workload) runResult {
	b.Helper()
	srv := natstest.Start(b, natstest.Options{})
	defer srv.Shutdown()
	cfg := natsConfig(b, srv)
	// The bridge's own code creates the stream, so that both sides write
	// to the same kind of stream.
	if err := newNATSSink(b, cfg).Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.NATS.MaxInFlight),
		jetstream.WithPublishAsyncTimeout(cfg.NATS.AckTimeout),
	)
	if err != nil {
		b.Fatal(err)
	}
	// Waiting for a free slot is bounded like waiting for an ack, as the
	// sink bounds it.
	stallWait := jetstream.WithStallWait(cfg.NATS.AckTimeout)
	futures := make([]jetstream.PubAckFuture, len(nb.msgs))
	var failure error
	r := timed(func() {
		for i, m := range nb.msgs {
			if futures[i], failure = js.PublishMsgAsync(m, stallWait); failure != nil {
				return
			}
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case failure = <-f.Err():
				return
			}
		}
	})
	if failure != nil {
		b.Fatalf("baseline: %v", failure)
	}
	natsStream(b, srv, cfg, len(nb.msgs))
	return r
}

// natsStream returns the bridge's stream on srv, failing unless it holds
// n messages: the side that wrote it stored every message once.
func natsStream(b *testing.B, srv *natstest.Server, cfg *config.Config, n int) jetstream.Stream {
	b.Helper()
	js, err := jetstream.New(srv.Conn(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cfg.NATS.Stream)
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		b.Fatalf("stream %s holds %d messages, want %d", cfg.NATS.Stream, info.State.Msgs, n)
	}
	return st
}

// check fails unless a sample of the messages the bridge stored is exactly
// what the baseline publishes; under a view, they also carry the object's
// view state (Bridge-View), which the baseline has no view to make.
func (nb *natsBus) check(b *testing.B, st jetstream.Stream, viewed bool) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, i := range []int{0, len(nb.msgs) / 2, len(nb.msgs) - 1} {
		want := nb.msgs[i]
		got, err := st.GetLastMsgForSubject(ctx, want.Subject)
		if err != nil {
			b.Fatalf("message %d on %s: %v", i, want.Subject, err)
		}
		if !bytes.Equal(got.Data, want.Data) {
			b.Fatalf("message %d on %s: the bridge stored a body of %d bytes that differs from the baseline's %d", i, want.Subject, len(got.Data), len(want.Data))
		}
		if viewed {
			if got.Header.Get(wire.NATS.ViewHeader()) == "" {
				b.Fatalf("message %d on %s: no %s header under a view", i, want.Subject, wire.NATS.ViewHeader())
			}
			got.Header.Del(wire.NATS.ViewHeader())
		}
		if fmt.Sprint(got.Header) != fmt.Sprint(want.Header) {
			b.Fatalf("message %d on %s: the bridge's headers %v differ from the baseline's %v", i, want.Subject, got.Header, want.Header)
		}
	}
}
