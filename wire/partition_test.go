package wire

import (
	"fmt"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The partition of a key is what Kafka's Java client computes, so
// consumers in any language can find an object's partition.
func TestPartitionForMatchesJava(t *testing.T) {
	// murmur2 of these keys, as Kafka's own tests of Utils.murmur2 give them.
	java := []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, tt := range java {
		for _, n := range []int{1, 3, 6, 10, 97} {
			t.Run(fmt.Sprintf("%s/%d", tt.key, n), func(t *testing.T) {
				want := int((uint32(tt.hash) & 0x7fffffff) % uint32(n))
				if got := PartitionFor([]byte(tt.key), n); got != want {
					t.Errorf("PartitionFor(%q, %d) = %d, want %d", tt.key, n, got, want)
				}
			})
		}
	}
}

// franz-go's default partitioner agrees for keys like the bridge's.
func TestPartitionForMatchesFranzGo(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 1000 {
		key := fmt.Sprintf("namespace-%d/object-%d", i%7, i)
		for _, n := range []int{1, 6, 12} {
			want := p.Partition(&kgo.Record{Key: []byte(key)}, n)
			if got := PartitionFor([]byte(key), n); got != want {
				t.Fatalf("PartitionFor(%q, %d) = %d, franz-go says %d", key, n, got, want)
			}
		}
	}
}

// So does kafka-go's, which the bridge's sink writes with.
func TestPartitionForMatchesKafkaGo(t *testing.T) {
	b := kafkago.Murmur2Balancer{Consistent: true}
	for i := range 1000 {
		key := fmt.Sprintf("namespace-%d/object-%d", i%7, i)
		for _, n := range []int{1, 6, 12} {
			ids := make([]int, n)
			for j := range ids {
				ids[j] = j
			}
			want := b.Balance(kafkago.Message{Key: []byte(key)}, ids...)
			if got := PartitionFor([]byte(key), n); got != want {
				t.Fatalf("PartitionFor(%q, %d) = %d, kafka-go says %d", key, n, got, want)
			}
		}
	}
}
