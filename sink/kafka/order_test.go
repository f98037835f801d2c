package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/kafkatest"
)

// Acceptance 1: 10,000 deltas of 1,000 objects, through the bridge's
// pipeline, into a topic of 6 partitions. A consumer group reads every
// delta exactly once, each object's deltas in one partition (the one
// PartitionFor names) and in resourceVersion order.
func TestManyObjectsInOrder(t *testing.T) {
	const (
		objects    = 1000
		perObject  = 10
		partitions = 6
	)
	c := kafkatest.Start(t)
	s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": fmt.Sprint(partitions)}), configmaps)
	if got := c.Partitions("kube.configmaps"); got != partitions {
		t.Fatalf("topic kube.configmaps has %d partitions, want %d", got, partitions)
	}
	st := startPipeline(t, s)

	start := time.Now()
	rv := 0
	for round := range perObject {
		for i := range objects {
			rv++
			typ := source.Updated
			if round == 0 {
				typ = source.Added
			}
			st.OnDelta(delta(fmt.Sprintf("cm-%04d", i), rv, typ))
		}
	}
	st.drain(t, 2*time.Minute)
	took := time.Since(start)
	stats := st.Stats()
	if stats.Published != objects*perObject || stats.Skipped+stats.Retried+stats.Coalesced+stats.Abandoned != 0 {
		t.Fatalf("pipeline stats %+v, want %d published and nothing else", stats, objects*perObject)
	}
	t.Logf("published %d deltas of %d objects to %d partitions in %s (%.0f/s)",
		objects*perObject, objects, partitions, took.Round(time.Millisecond), float64(objects*perObject)/took.Seconds())

	start = time.Now()
	recs := groupRead(t, c, "acceptance-1", objects*perObject, "kube.configmaps")
	t.Logf("consumer group read %d records in %s", len(recs), time.Since(start).Round(time.Millisecond))
	// Anything more than the deltas would be a repeat: the log must hold
	// exactly as many records as were published.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ends, err := c.Admin().ListEndOffsets(ctx, "kube.configmaps")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	perPartition := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset; perPartition[o.Partition] = o.Offset })
	if total != objects*perObject || len(recs) != objects*perObject {
		t.Fatalf("topic holds %d records, the group read %d; want exactly %d", total, len(recs), objects*perObject)
	}
	t.Logf("records per partition: %v", perPartition)

	h := histories(t, recs)
	for _, p := range h.problems {
		t.Error(p)
	}
	if len(h.rvs) != objects {
		t.Errorf("records about %d objects, want %d", len(h.rvs), objects)
	}
	for key, rvs := range h.rvs {
		if len(rvs) != perObject || !increasing(rvs) {
			t.Errorf("%s: resourceVersions %v, want %d increasing", key, rvs, perObject)
		}
		if want := int32(PartitionFor(key, partitions)); h.partition[key] != want {
			t.Errorf("%s: in partition %d, PartitionFor says %d", key, h.partition[key], want)
		}
	}
	if len(perPartition) != partitions {
		t.Errorf("records in %d partitions, want all %d used", len(perPartition), partitions)
	}
}

// increasing reports whether every resourceVersion is above the one
// before it.
func increasing(rvs []int) bool {
	for i := 1; i < len(rvs); i++ {
		if rvs[i] <= rvs[i-1] {
			return false
		}
	}
	return true
}
