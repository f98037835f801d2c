package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/test/tlstest"
)

// A cluster, plain or secured, takes records and gives them back.
func TestStartAndReadAll(t *testing.T) {
	pki := tlstest.NewPKI(t)
	tests := []struct {
		name string
		opts []Option
	}{
		{"plain", nil},
		{"tls and scram", []Option{WithTLS(pki.Server, pki.Client), WithSASL("SCRAM-SHA-256", "u", "p")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Start(t, tt.opts...)
			if n := len(c.Addrs()); n != Brokers {
				t.Fatalf("%d brokers, want %d", n, Brokers)
			}
			c.CreateTopic("t", 3, map[string]string{"cleanup.policy": "compact"})
			if c.Partitions("t") != 3 || c.TopicConfig("t", "cleanup.policy") != "compact" {
				t.Fatalf("topic t: %d partitions, cleanup.policy %q", c.Partitions("t"), c.TopicConfig("t", "cleanup.policy"))
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var recs []*kgo.Record
			for _, k := range []string{"a", "b", "c", "d"} {
				recs = append(recs, &kgo.Record{Topic: "t", Key: []byte(k), Value: []byte(k)})
			}
			if err := c.Client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			got := c.ReadAll("t")
			total := int64(0)
			for _, end := range c.EndOffsets("t") {
				total += end
			}
			if len(got) != 4 || total != 4 {
				t.Errorf("read %d records, end offsets add up to %d; want 4", len(got), total)
			}
		})
	}
}
