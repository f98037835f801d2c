package kafka

import kafkago "github.com/segmentio/kafka-go"

// balancer picks a record's partition from its key, the way the Java
// client's default partitioner does for keyed records:
//
//	partition = (murmur2(key) & 0x7fffffff) % partitions
//
// where murmur2 is Kafka's 32-bit MurmurHash2 (seed 0x9747b28c) of the key's
// bytes. Every record the bridge writes has a key (tombstones included), so
// the partition depends on the key and the partition count alone. Java,
// librdkafka ("murmur2" / "murmur2_random"), franz-go's default and
// kafka-go's Murmur2Balancer all compute the same.
var balancer = kafkago.Murmur2Balancer{Consistent: true}

// PartitionFor is the partition of a topic with the given number of
// partitions that records with key go to. Consumers can rely on it: it
// depends on nothing but the key and the partition count. Adding
// partitions to a topic moves keys, and with them the order between an
// object's records written before and after the change.
func PartitionFor(key string, partitions int) int {
	if partitions <= 0 {
		return 0
	}
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	return balancer.Balance(kafkago.Message{Key: []byte(key)}, ids...)
}
