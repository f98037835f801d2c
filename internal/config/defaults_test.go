package config

import (
	"reflect"
	"testing"

	"github.com/kubebus/bridge/kafkaconn"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/sink/nats"
)

// The defaults a program writing a configuration by hand starts from
// (DefaultConfig) are those the bridge reads from an environment that sets
// none of the variables.
func TestDefaultConfigsAreTheBridges(t *testing.T) {
	c, err := Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=kafka", "BRIDGE_KAFKA_BROKERS=kafka-0:9092"})
	if err != nil {
		t.Fatal(err)
	}
	if want := nats.DefaultConfig(); !reflect.DeepEqual(c.NATS, want) {
		t.Errorf("NATS: the bridge reads\n%#v\nDefaultConfig is\n%#v", c.NATS, want)
	}
	want := kafka.DefaultConfig()
	want.Brokers = []string{"kafka-0:9092"}
	if !reflect.DeepEqual(c.Kafka, want) {
		t.Errorf("Kafka: the bridge reads\n%+v\nDefaultConfig is\n%+v", c.Kafka, want)
	}
	conn := kafkaconn.DefaultConfig()
	conn.Brokers = want.Brokers
	if !reflect.DeepEqual(c.Kafka.Config, conn) {
		t.Errorf("Kafka connection: the bridge reads\n%+v\nDefaultConfig is\n%+v", c.Kafka.Config, conn)
	}
}
