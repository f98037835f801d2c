package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

const (
	// fetchMaxBytes bounds one fetch's response.
	fetchMaxBytes = 4 << 20
	// fetchMaxWait is how long a fetch waits for data. readSpan only
	// fetches below the end offsets, where data is at hand, so this is
	// rarely waited out.
	fetchMaxWait = 500 * time.Millisecond
	// readTimeout bounds one fetch's round trip.
	readTimeout = 30 * time.Second
)

// span is the offsets of one partition to read: [First, End).
type span struct {
	Partition  int
	First, End int64
}

// spans takes the first and end offsets of every partition of topic.
func spans(ctx context.Context, client *kafkago.Client, topic string) ([]span, error) {
	md, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("read metadata of topic %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		if len(md.Topics) == 1 {
			err = md.Topics[0].Error
		}
		return nil, fmt.Errorf("read metadata of topic %s: %w", topic, errors.Join(err, errors.New("no such topic")))
	}
	var reqs []kafkago.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafkago.FirstOffsetOf(p.ID), kafkago.LastOffsetOf(p.ID))
	}
	res, err := client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of topic %s: %w", topic, err)
	}
	var out []span
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("list offsets of topic %s partition %d: %w", topic, p.Partition, p.Error)
		}
		out = append(out, span{Partition: p.Partition, First: p.FirstOffset, End: p.LastOffset})
	}
	if len(out) != len(md.Topics[0].Partitions) {
		return nil, fmt.Errorf("list offsets of topic %s: %d of %d partitions answered", topic, len(out), len(md.Topics[0].Partitions))
	}
	return out, nil
}

// readSpan hands every record of sp to apply, in offset order. Compaction
// leaves gaps in the offsets, at the end too: when a fetch below the end
// finds nothing more, the rest of the span was compacted away.
func readSpan(ctx context.Context, dialer *kafkago.Dialer, brokers []string, topic string, sp span, apply func(kafkago.Message) error) error {
	if sp.First >= sp.End {
		return nil
	}
	conn, err := dialLeader(ctx, dialer, brokers, topic, sp.Partition)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Closing the connection unblocks a read in flight.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if _, err := conn.Seek(sp.First, kafkago.SeekAbsolute); err != nil {
		return fmt.Errorf("partition %d: seek to %d: %w", sp.Partition, sp.First, err)
	}
	offset := sp.First
	for offset < sp.End {
		if err := conn.SetReadDeadline(time.Now().Add(readTimeout)); err != nil {
			return fmt.Errorf("partition %d: %w", sp.Partition, err)
		}
		batch := conn.ReadBatchWith(kafkago.ReadBatchConfig{MinBytes: 1, MaxBytes: fetchMaxBytes, MaxWait: fetchMaxWait})
		done := false
		for !done {
			msg, err := batch.ReadMessage()
			switch {
			case err != nil:
				done = true // the batch's error, if any, comes from Close
			case msg.Offset >= sp.End:
				batch.Close()
				return nil
			default:
				if err := apply(msg); err != nil {
					batch.Close()
					return fmt.Errorf("partition %d offset %d: %w", sp.Partition, msg.Offset, err)
				}
			}
		}
		if err := batch.Close(); err != nil {
			return fmt.Errorf("partition %d: read from offset %d: %w", sp.Partition, offset, errors.Join(ctx.Err(), err))
		}
		next := batch.Offset()
		if next <= offset {
			return nil // nothing left below the end
		}
		offset = next
	}
	return nil
}

// dialLeader connects to the leader of a partition, asking each bootstrap
// broker in turn where it is.
func dialLeader(ctx context.Context, dialer *kafkago.Dialer, brokers []string, topic string, partition int) (*kafkago.Conn, error) {
	var errs []error
	for _, b := range brokers {
		conn, err := dialer.DialLeader(ctx, "tcp", b, topic, partition)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("via %s: %w", b, err))
	}
	return nil, fmt.Errorf("partition %d: connect to its leader: %w", partition, errors.Join(errs...))
}

// ReadTopic hands every record of topic below the partitions' end offsets
// when it is called to apply, each partition's in offset order.
func (c *Conn) ReadTopic(ctx context.Context, client *kafkago.Client, topic string, apply func(kafkago.Message) error) error {
	sps, err := spans(ctx, client, topic)
	if err != nil {
		return err
	}
	dialer := c.Dialer()
	for _, sp := range sps {
		if err := readSpan(ctx, dialer, c.Brokers(), topic, sp, apply); err != nil {
			return err
		}
	}
	return nil
}
