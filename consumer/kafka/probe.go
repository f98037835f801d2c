package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeBytes is how much one probe fetches: enough to see past a few
// batches with nothing to deliver; a broker returns at least one whole
// batch whatever the limit.
const probeBytes = 1 << 20

// maxProbeSteps bounds how many fetches one probe makes.
const maxProbeSteps = 8

// errProbeOutOfRange is a probe's answer when the offset is below the log
// start (or beyond the end).
var errProbeOutOfRange = errors.New("offset out of range")

// probe tells whether partition p holds a record a consumer is given at
// an offset in [from, end). A consumer reading a partition stops at the
// last record it is given, and a partition's last offsets may hold none:
// a compacted topic may have dropped them (a tombstone past its delete
// retention), and transaction markers are never given. Without the probe
// a read up to the end offset would wait for them forever.
//
// It answers done when the partition has no such record (the read is
// complete up to end), and false when it has one, or when it cannot tell
// now (a leader moved, a broker error): the caller waits and asks again.
// errProbeOutOfRange says from is no longer in the log.
func (l *Log) probe(ctx context.Context, ts topicState, p int, from, end int64) (done bool, err error) {
	leader := ts.leaders[p]
	if leader < 0 {
		return false, nil
	}
	off := from
	for range maxProbeSteps {
		if off >= end {
			return true, nil
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = probeBytes
		req.SessionEpoch = -1 // a full fetch, outside any fetch session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = l.topic
		rt.TopicID = ts.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rp.FetchOffset = off
		rp.PartitionMaxBytes = probeBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		kresp, err := l.client.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			l.log.Debug("consumer/kafka: probe failed", "partition", p, "offset", off, "error", err)
			return false, nil
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			l.log.Debug("consumer/kafka: probe answered oddly", "partition", p, "offset", off, "error", err)
			return false, nil
		}
		part := &resp.Topics[0].Partitions[0]
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:    off,
			Topic:     l.topic,
			Partition: int32(p),
		}, part, kgo.DefaultDecompressor(), nil)
		switch {
		case errors.Is(fp.Err, kerr.OffsetOutOfRange):
			return false, fmt.Errorf("partition %d offset %d: %w", p, off, errProbeOutOfRange)
		case fp.Err != nil:
			l.log.Debug("consumer/kafka: probe answered with an error", "partition", p, "offset", off, "error", fp.Err)
			return false, nil
		}
		for _, r := range fp.Records {
			if r.Offset >= off && r.Offset < end {
				return false, nil // the consumer will be given it
			}
		}
		switch {
		case next > off:
			off = next // these offsets hold nothing to give; look further
		case len(part.RecordBatches) == 0 && part.HighWatermark >= end:
			return true, nil // nothing at all from off up to the end
		default:
			return false, nil
		}
	}
	return off >= end, nil
}
