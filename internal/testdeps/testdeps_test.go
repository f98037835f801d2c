// Package testdeps pins modules that the sinks' code and tests are about to
// use, so that go.mod holds them while that code is written.
package testdeps

import (
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/segmentio/kafka-go/sasl/scram"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
)
