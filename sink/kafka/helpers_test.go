package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

var (
	configmaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// loadConfig reads a Config from vars the way the bridge does, defaults
// included.
func loadConfig(t testing.TB, vars map[string]string) Config {
	t.Helper()
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: vars}); err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return c
}

// settings reads a Config from vars and parses it, failing t when it is
// invalid.
func settings(t testing.TB, vars map[string]string) *Parsed {
	t.Helper()
	c := loadConfig(t, vars)
	s, err := c.Parse()
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return s
}

// clusterConfig is the default configuration for c's brokers, with vars
// on top, parsed.
func clusterConfig(t *testing.T, c *kafkatest.Cluster, vars map[string]string) *Parsed {
	t.Helper()
	all := map[string]string{"BRIDGE_KAFKA_BROKERS": joinAddrs(c.Addrs())}
	maps.Copy(all, vars)
	return settings(t, all)
}

func joinAddrs(addrs []string) string {
	s := ""
	for i, a := range addrs {
		if i > 0 {
			s += ","
		}
		s += a
	}
	return s
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newSink starts a sink that the end of t closes.
func newSink(t *testing.T, cfg *Parsed, resources ...schema.GroupVersionResource) *Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := New(ctx, cfg, resources, Options{}, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// message is a change of an object at rv.
func message(gvr schema.GroupVersionResource, namespace, name, action string, rv int) *wire.Message {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	return &wire.Message{
		ID:              fmt.Sprintf("%s-%s-%d-%s", gvr.Resource, key, rv, action),
		Source:          "/clusters/test/" + gvr.Resource,
		Type:            "io.kubebus.object." + action,
		Subject:         key,
		Time:            time.Date(2026, 11, 21, 5, 12, 31, 512904127, time.UTC),
		Action:          action,
		Resource:        gvr,
		ResourceVersion: fmt.Sprint(rv),
		UID:             "uid-" + key,
		Kind:            "ConfigMap",
		APIVersion:      gvr.GroupVersion().String(),
		Namespace:       namespace,
		Name:            name,
		Cluster:         "test",
		Data:            json.RawMessage(fmt.Sprintf(`{"object":{"metadata":{"name":%q,"resourceVersion":"%d"}}}`, name, rv)),
	}
}

// decode reads a record the sink wrote: its message, or nil for a
// tombstone.
func decode(t *testing.T, r *kgo.Record) *wire.Message {
	t.Helper()
	if r.Value == nil {
		return nil
	}
	m, err := wire.Kafka.Decode(r.Value, maps.All(headersOf(r)))
	if err != nil {
		t.Fatalf("%s[%d]@%d: %v", r.Topic, r.Partition, r.Offset, err)
	}
	return m
}

func headersOf(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}
