package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// natsEnv configures a bridge that watches the ConfigMaps of ns and
// publishes them to srv, with extra on top. The stream is of the history
// layout, where the tests read every change of an object, unless extra
// sets BRIDGE_NATS_LAYOUT.
func natsEnv(srv *natstest.Server, ns string, extra map[string]string) map[string]string {
	env := srv.Env()
	maps.Copy(env, map[string]string{
		"BRIDGE_SINK":         "nats",
		"BRIDGE_RESOURCES":    "configmaps",
		"BRIDGE_NAMESPACES":   ns,
		"BRIDGE_CLUSTER_NAME": "e2e",
		"BRIDGE_NATS_LAYOUT":  string(natssink.LayoutHistory),
	})
	maps.Copy(env, extra)
	return env
}

// natsSubjects is the subject filter of the ConfigMaps of ns, as the
// history layout's default subject makes them.
func natsSubjects(ns string) string { return natsKindSubjects(ns, []watchedKind{configMaps})[0] }

// natsStateSubjects is the subject filter of the ConfigMaps of ns, as the
// state layout's default subject makes them.
func natsStateSubjects(ns string) string {
	return natsLayoutSubjects(string(natssink.LayoutState), ns, []watchedKind{configMaps})[0]
}

// natsKindSubjects are the subject filters of the objects of kinds in ns,
// as the history layout's default subject makes them.
func natsKindSubjects(ns string, kinds []watchedKind) []string {
	return natsLayoutSubjects(string(natssink.LayoutHistory), ns, kinds)
}

// natsLayoutSubjects are the subject filters of the objects of kinds in
// ns, as the default subject of layout makes them.
func natsLayoutSubjects(layout, ns string, kinds []watchedKind) []string {
	var out []string
	for _, k := range kinds {
		group := wire.CoreGroupToken
		if k.gvr.Group != "" {
			group = wire.EscapeToken(k.gvr.Group)
		}
		version := "." + k.gvr.Version
		if layout == string(natssink.LayoutState) {
			version = ""
		}
		out = append(out, "kube.e2e."+group+version+"."+k.gvr.Resource+"."+wire.EscapeToken(ns)+".>")
	}
	return out
}

// natsEvent is one message read from a stream.
type natsEvent struct {
	subject string
	seq     uint64
	msgID   string
	msg     *wire.Message
}

// natsConsume reads, with a consumer configured by cfg, every message the
// stream holds for it, acknowledging each when cfg asks for acks, and
// checks that none is left pending.
func natsConsume(t *testing.T, nc *nats.Conn, stream string, cfg jetstream.ConsumerConfig) []natsEvent {
	t.Helper()
	return natsFetch(t, nc, stream, cfg, true)
}

// natsFetch reads what the consumer has pending when it is made. With
// strict, nothing may be pending afterwards; without, the stream may be
// growing meanwhile. A consumer without a durable name is deleted after.
func natsFetch(t *testing.T, nc *nats.Conn, stream string, cfg jetstream.ConsumerConfig, strict bool) []natsEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		t.Fatalf("consumer on %s: %v", stream, err)
	}
	if cfg.Durable == "" {
		defer js.DeleteConsumer(context.WithoutCancel(ctx), stream, cons.CachedInfo().Name)
	}
	want := cons.CachedInfo().NumPending
	var out []natsEvent
	for uint64(len(out)) < want {
		batch, err := cons.Fetch(int(min(want-uint64(len(out)), 256)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			d, err := wire.NATS.Decode(m.Data(), wire.Headers(m.Headers()))
			if err != nil {
				t.Fatalf("message %d: %v", md.Sequence.Stream, err)
			}
			out = append(out, natsEvent{subject: m.Subject(), seq: md.Sequence.Stream, msgID: m.Headers().Get(wire.NATSMsgIDHeader), msg: d})
			if cfg.AckPolicy == jetstream.AckExplicitPolicy {
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
		}
		if batch.Error() != nil || got == 0 {
			t.Fatalf("fetch after %d of %d messages: got %d, %v", len(out), want, got, batch.Error())
		}
	}
	if !strict {
		return out
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || (cfg.AckPolicy == jetstream.AckExplicitPolicy && info.NumAckPending != 0) {
		t.Errorf("consumer left %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
	}
	return out
}

// natsRead reads every message of stream matching filter with a sequence
// above after, with a throwaway consumer.
func natsRead(t *testing.T, nc *nats.Conn, stream, filter string, after uint64) []natsEvent {
	t.Helper()
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     filter,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	}
	if after > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = after + 1
	}
	return natsConsume(t, nc, stream, cfg)
}

// natsCount is how many messages stream holds on subjects matching filter.
func natsCount(t *testing.T, nc *nats.Conn, stream, filter string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), stream)
	if err != nil {
		return 0 // not created yet, or the server is restarting
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}
