package outside

import (
	"errors"
	"slices"
	"testing"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/sink/nats"
)

// The sinks' configurations are written from plain values, start from
// the defaults of the variables, parse, and say which variable is at
// fault in errors a stranger can inspect.
func TestConfigurationsFromPlainValues(t *testing.T) {
	nc := nats.DefaultConfig()
	if nc.Stream != "KUBE" || nc.Mode != nats.ModeJetStream || nc.URL != "nats://127.0.0.1:4222" {
		t.Errorf("NATS defaults: %+v", nc)
	}
	nc.Token = envvar.Secret("t0ken")
	nc.TLSFiles = envvar.TLSFiles{}
	if _, err := nc.Parse(); err != nil {
		t.Errorf("NATS configuration: %v", err)
	}

	kc := kafka.DefaultConfig()
	if kc.TopicPrefix != "kube" || kc.ClientID != "kubebus-bridge" || kc.Layout != kafka.LayoutState {
		t.Errorf("Kafka defaults: %+v", kc)
	}
	kc.Config = kafkaconn.Config{ClientID: "outside", SASLMechanism: kafkaconn.SASLScramSHA256, SASLUsername: "u", SASLPassword: "p"}
	if got := vars(t, parseErr(kc.Parse())); !slices.Equal(got, []string{"BRIDGE_KAFKA_BROKERS"}) {
		t.Errorf("Kafka configuration without brokers: variables at fault %v", got)
	}
	kc.Brokers = []string{"kafka-0:9092"}
	p, err := kc.Parse()
	if err != nil {
		t.Fatalf("Kafka configuration: %v", err)
	}
	if got := p.Conn().String(); got != "brokers=kafka-0:9092 tls=false sasl=scram-sha-256" {
		t.Errorf("Kafka connection: %s", got)
	}

	nc.Stream, nc.StreamReplicas = "a.b", 9
	if got := vars(t, parseErr(nc.Parse())); !slices.Equal(got, []string{"BRIDGE_NATS_STREAM", "BRIDGE_NATS_STREAM_REPLICAS"}) {
		t.Errorf("bad NATS configuration: variables at fault %v", got)
	}
}

func parseErr[T any](_ T, err error) error { return err }

// vars lists the variables the *envvar.Errors joined in err name.
func vars(t *testing.T, err error) []string {
	t.Helper()
	var names []string
	for _, e := range envvar.Split(err) {
		var ve *envvar.Error
		if !errors.As(e, &ve) {
			t.Fatalf("%v is not an *envvar.Error", e)
		}
		names = append(names, ve.Var)
	}
	return names
}
