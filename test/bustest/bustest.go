// Package bustest is what tests share to put the bridge's
// messages on a test bus: a bridge sink configured from the bridge's own
// variables, as a deployment configures it, and the messages the bridge
// writes for an object's changes.
package bustest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink/kafka"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/wire"
)

// NATSSink is the bridge's NATS sink configured from vars (BRIDGE_NATS_*),
// closed when the test ends.
func NATSSink(t *testing.T, vars map[string]string) *natssink.Sink {
	t.Helper()
	var cfg natssink.Config
	set, err := parse(&cfg, vars, cfg.Parse)
	if err != nil {
		t.Fatal(err)
	}
	s, err := natssink.New(t.Context(), set, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// KafkaSink is the bridge's Kafka sink for resources configured from vars
// (BRIDGE_KAFKA_*), closed when the test ends.
func KafkaSink(t *testing.T, vars map[string]string, resources ...schema.GroupVersionResource) *kafka.Sink {
	t.Helper()
	var cfg kafka.Config
	set, err := parse(&cfg, vars, cfg.Parse)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kafka.New(t.Context(), set, resources, kafka.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// parse fills cfg from vars, as the bridge reads its environment, and
// returns what check makes of it.
func parse[C, S any](cfg *C, vars map[string]string, check func() (S, error)) (S, error) {
	if err := env.ParseWithOptions(cfg, env.Options{Environment: vars}); err != nil {
		var zero S
		return zero, err
	}
	return check()
}

// Object names the object a Message is about: a namespaced object of
// Cluster, of resource Resource and kind Kind in the core API group.
type Object struct {
	Cluster   string
	Resource  schema.GroupVersionResource
	Kind      string
	Namespace string
	Name      string
}

// Message is the bridge's message for the change action ("added",
// "updated", "deleted") of o at resource version rv, whose data is data.
// Its ID is unique per object, version and action; its UID is "uid-"
// and the object's name.
func (o Object) Message(action string, rv int, data []byte) *wire.Message {
	return &wire.Message{
		ID:     fmt.Sprintf("uid-%s-%d-%s", o.Name, rv, action),
		Source: "/clusters/" + o.Cluster + "/api/v1/" + o.Resource.Resource, Type: "io.kubebus.object." + action,
		Subject: o.Namespace + "/" + o.Name, Time: time.Now(), Action: action,
		Resource: o.Resource, ResourceVersion: fmt.Sprint(rv),
		UID: "uid-" + o.Name, Kind: o.Kind, APIVersion: "v1", Namespace: o.Namespace, Name: o.Name, Cluster: o.Cluster,
		Data: data,
	}
}
