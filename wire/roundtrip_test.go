package wire_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/test/bustest"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// notAttributes are the fields of wire.Message that are no CloudEvents
// attribute: routing, the view's state, the payload and its encoding.
var notAttributes = map[string]bool{"Action": true, "Resource": true, "View": true, "Data": true, "Encoded": true}

// full is a message that carries every attribute of the table, optional
// ones included, with values that the NATS binding must escape.
func full(t *testing.T) *wire.Message {
	t.Helper()
	m := &wire.Message{
		Time:            time.Date(2026, 11, 27, 19, 1, 2, 345678901, time.UTC),
		Action:          wire.ActionDeleted,
		Resource:        schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		ResourceVersion: "4711",
		UID:             "0f1e2d3c-0000-4000-8000-000000000001",
		Kind:            "Widget",
		APIVersion:      "example.com/v1",
		Namespace:       "team-a",
		Name:            "wïdget \"one\" 100%",
		Cluster:         "prod-eu",
		Snapshot:        true,
		ContentOmitted:  true,
		Reason:          "left-filter",
		Data:            json.RawMessage(`{"object":{"kind":"Widget"}}`),
	}
	m.Derive()
	for _, a := range wire.Attributes() {
		if _, ok := a.Value(m); !ok {
			t.Fatalf("the test message leaves out attribute %s: set it, so that every attribute is carried", a.Name())
		}
	}
	return m
}

// Every field of a message is an attribute of the table, or one of the
// few that are not: a field added without its attribute is never written.
func TestEveryFieldIsAnAttribute(t *testing.T) {
	typ := reflect.TypeFor[wire.Message]()
	for f := range typ.Fields() {
		if notAttributes[f.Name] {
			continue
		}
		if wire.AttributeNamed(strings.ToLower(f.Name)) == nil {
			t.Errorf("field %s of wire.Message has no attribute %q in the table", f.Name, strings.ToLower(f.Name))
		}
	}
}

// Every attribute goes through each bus, in each content mode, written by
// the bridge's sink and read back by wire's decoder, unchanged; in binary
// mode each attribute has a header of its own, under the binding's name.
func TestEveryAttributeRoundTrips(t *testing.T) {
	want := full(t)
	for _, mode := range []string{"structured", "binary"} {
		t.Run("nats/"+mode, func(t *testing.T) {
			raw := publishNATS(t, want, mode)
			if mode == "binary" {
				hasEveryHeader(t, wire.NATS, func(name string) bool { return len(raw.Header[name]) > 0 })
			}
			got, err := wire.NATS.Decode(raw.Data, wire.Headers(raw.Header))
			if err != nil {
				t.Fatal(err)
			}
			same(t, got, want)
		})
		t.Run("kafka/"+mode, func(t *testing.T) {
			rec := publishKafka(t, want, mode)
			headers := map[string]string{}
			for _, h := range rec.Headers {
				headers[h.Key] = string(h.Value)
			}
			if mode == "binary" {
				hasEveryHeader(t, wire.Kafka, func(name string) bool { _, ok := headers[name]; return ok })
			}
			got, err := wire.Kafka.Decode(rec.Value, maps.All(headers))
			if err != nil {
				t.Fatal(err)
			}
			same(t, got, want)
		})
	}
}

func hasEveryHeader(t *testing.T, b *wire.Binding, has func(string) bool) {
	t.Helper()
	for _, a := range wire.Attributes() {
		if !has(b.Header(a)) {
			t.Errorf("%s binary mode: no header %s for attribute %s", b, b.Header(a), a.Name())
		}
	}
}

func same(t *testing.T, got, want *wire.Message) {
	t.Helper()
	w := *want
	w.View, w.Encoded = "", nil
	if !reflect.DeepEqual(*got, w) {
		t.Errorf("read back\n got %+v\nwant %+v", *got, w)
	}
}

// publishNATS publishes m with the bridge's NATS sink in mode and reads
// the stream's message back.
func publishNATS(t *testing.T, m *wire.Message, mode string) *jetstream.RawStreamMsg {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{})
	vars := srv.Env()
	vars["BRIDGE_NATS_CE_MODE"] = mode
	s := bustest.NATSSink(t, vars)
	if err := s.Publish(t.Context(), []*wire.Message{m}); err != nil {
		t.Fatal(err)
	}
	stream, err := srv.JetStream(t).Stream(t.Context(), wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// publishKafka publishes m with the bridge's Kafka sink in mode and reads
// the topic's record back.
func publishKafka(t *testing.T, m *wire.Message, mode string) *kgo.Record {
	t.Helper()
	c := kafkatest.Start(t)
	s := bustest.KafkaSink(t, map[string]string{"BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ","), "BRIDGE_KAFKA_CE_MODE": mode,
		"BRIDGE_KAFKA_TOMBSTONES": "false", "BRIDGE_KAFKA_LAYOUT": "history"}, m.Resource)
	if err := s.Publish(t.Context(), []*wire.Message{m}); err != nil {
		t.Fatal(err)
	}
	recs := c.ReadAll(wire.TopicFor(wire.DefaultTopicPrefix, m.Resource.GroupResource()))
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	return recs[0]
}
