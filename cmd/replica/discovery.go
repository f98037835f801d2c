package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// The discovery readers below stand in for consumer/nats.NewDiscoveryLog
// and consumer/kafka.NewDiscoveryLog until they land: they read every
// cluster's latest document, then follow.

// natsDiscovery reads the discovery documents of a stream.
type natsDiscovery struct {
	js     jetstream.JetStream
	stream string
	prefix string
	log    *slog.Logger
}

var _ consumer.DiscoveryLog = (*natsDiscovery)(nil)

func (d *natsDiscovery) Follow(ctx context.Context, fn func(wire.Discovery) error) error {
	c, err := d.js.OrderedConsumer(ctx, d.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{wire.DiscoverySubjects(d.prefix)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("nats discovery: %w", err)
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("nats discovery: %w", err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("nats discovery: %w", err)
		}
		doc, err := wire.UnmarshalDiscovery(m.Data())
		if err != nil {
			d.log.Warn("replica: discovery document skipped", "subject", m.Subject(), "err", err)
			continue
		}
		if err := fn(doc); err != nil {
			return err
		}
	}
}

// kafkaDiscovery reads the compacted discovery topic from its start.
type kafkaDiscovery struct {
	brokers []string
	topic   string
	log     *slog.Logger
}

var _ consumer.DiscoveryLog = (*kafkaDiscovery)(nil)

func (d *kafkaDiscovery) Follow(ctx context.Context, fn func(wire.Discovery) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.ConsumeTopics(d.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("kafka discovery: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			d.log.Debug("replica: discovery topic", "topic", topic, "err", err)
		})
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			if ferr != nil || r.Value == nil {
				return
			}
			doc, err := wire.UnmarshalDiscovery(r.Value)
			if err != nil {
				d.log.Warn("replica: discovery document skipped", "topic", r.Topic, "offset", r.Offset, "err", err)
				return
			}
			ferr = fn(doc)
		})
		if ferr != nil {
			return ferr
		}
	}
}
