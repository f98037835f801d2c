package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// defaults is the configuration with every default, as the bridge reads
// it from an empty environment.
func defaults(t testing.TB) Config {
	t.Helper()
	return parseEnv(t, nil)
}

// parseEnv reads a configuration from vars, defaults included.
func parseEnv(t testing.TB, vars map[string]string) Config {
	t.Helper()
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: vars}); err != nil {
		t.Fatalf("parse configuration: %v", err)
	}
	return c
}

// serverConfig is the configuration for srv, with vars on top.
func serverConfig(t testing.TB, srv *natstest.Server, vars map[string]string) Config {
	t.Helper()
	all := srv.Env()
	maps.Copy(all, vars)
	return parseEnv(t, all)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// parse parses c, failing t when it is invalid.
func parse(t testing.TB, c Config) *Parsed {
	t.Helper()
	s, err := c.Parse()
	if err != nil {
		t.Fatalf("parse configuration: %v", err)
	}
	return s
}

// newSink opens a sink for cfg and closes it when the test ends.
func newSink(t testing.TB, cfg Config) *Sink {
	t.Helper()
	s, err := New(t.Context(), parse(t, cfg), testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// message is change number version of ConfigMap obj in namespace ns, with
// a deterministic id.
func message(ns string, obj, version int) *wire.Message {
	name := fmt.Sprintf("cm-%03d", obj)
	rv := strconv.Itoa(1000 + version)
	action := "updated"
	if version == 0 {
		action = "added"
	}
	return &wire.Message{
		ID:              fmt.Sprintf("%s-%s-%s", ns, name, rv),
		Source:          "/clusters/test/api/v1/configmaps",
		Type:            "io.kubebus.object." + action,
		Subject:         ns + "/" + name,
		Time:            time.Date(2026, 11, 21, 5, 12, 31, version, time.UTC),
		Action:          action,
		Resource:        configmaps,
		ResourceVersion: rv,
		UID:             fmt.Sprintf("uid-%s-%03d", ns, obj),
		Kind:            "ConfigMap",
		APIVersion:      "v1",
		Namespace:       ns,
		Name:            name,
		Cluster:         "test",
		Data:            json.RawMessage(fmt.Sprintf(`{"object":{"metadata":{"name":%q,"resourceVersion":%q}}}`, name, rv)),
	}
}

// streamMsgs reads every message of stream whose subject matches filter
// with an ordered consumer, failing the test if they do not all arrive
// within a minute.
func streamMsgs(t testing.TB, nc *nats.Conn, stream, filter string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st := natstest.Stream(t, nc, stream)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	var want uint64
	for _, n := range info.State.Subjects {
		want += n
	}
	if want == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer it.Stop()
	var out []jetstream.Msg
	for uint64(len(out)) < want {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("read %s after %d of %d messages: %v", filter, len(out), want, err)
		}
		out = append(out, m)
	}
	return out
}

// decodeAll decodes messages read from a stream.
func decodeAll(t testing.TB, msgs []jetstream.Msg) []*wire.Message {
	t.Helper()
	out := make([]*wire.Message, len(msgs))
	for i, m := range msgs {
		d, err := decode(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// streamConfigFor is a stream of the state layout, as an operator makes it
// by hand, capturing subjects.
func streamConfigFor(name string, subjects ...string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage, Duplicates: time.Minute,
		MaxMsgsPerSubject: 1, AllowMsgTTL: true, Metadata: map[string]string{wire.MetadataDeleteTTL: "24h"},
	}
}

func streamInfo(t testing.TB, s *Sink, name string) *jetstream.StreamInfo {
	t.Helper()
	st, err := s.js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// decode reads a NATS message back as consumers do.
func decode(nm *nats.Msg) (*wire.Message, error) {
	return wire.NATS.Decode(nm.Data, wire.Headers(nm.Header))
}
