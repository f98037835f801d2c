package kafka

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/kafkatest"
)

// Acceptance 3: a broker becomes unavailable while the pipeline publishes.
// After it recovers nothing is lost and each object's deltas are in order.
// Where the broker refuses writes outright, nothing is repeated either;
// where it stored a write but answered with a timeout, the write may be
// repeated, right after itself.
func TestBrokerUnavailable(t *testing.T) {
	const objects, partitions = 200, 6
	tests := []struct {
		name string
		// outage makes node, the leader of partition 0, unavailable. It
		// returns how many writes the outage turned away so far, and a
		// function that ends the outage.
		outage func(t *testing.T, c *kafkatest.Cluster, node int32) (hits func() int, end func())
		// mayMiss is true when the client can miss the outage: after a
		// broker leaves, a metadata refresh that comes first sends every
		// write to the new leaders.
		mayMiss bool
		// repeats says whether a delta may reach the log more than once.
		repeats bool
	}{
		{
			name: "broker refuses writes",
			outage: func(t *testing.T, c *kafkatest.Cluster, node int32) (func() int, func()) {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Nodes: []int32{node}, Err: kerr.NotLeaderForPartition, Count: -1})
				return h.Hits, h.Remove
			},
		},
		{
			name: "broker stores writes but times out",
			outage: func(t *testing.T, c *kafkatest.Cluster, node int32) (func() int, func()) {
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Nodes: []int32{node}, Err: kerr.RequestTimedOut, Count: -1})
				return h.Hits, h.Remove
			},
			repeats: true,
		},
		{
			name: "broker leaves the cluster",
			outage: func(t *testing.T, c *kafkatest.Cluster, node int32) (func() int, func()) {
				// Count the writes the departed broker turns away.
				h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Nodes: []int32{node}, Observe: true, Count: -1})
				if err := c.RemoveNode(node); err != nil {
					t.Fatal(err)
				}
				return h.Hits, h.Remove
			},
			mayMiss: true,
			repeats: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t)
			s := newSink(t, clusterConfig(t, c, map[string]string{"BRIDGE_KAFKA_PARTITIONS": fmt.Sprint(partitions)}), configmaps)
			st := startPipeline(t, s)
			want := map[string][]int{}
			rv := 0
			feed := func(rounds int) {
				for range rounds {
					for i := range objects {
						rv++
						name := fmt.Sprintf("cm-%03d", i)
						typ := source.Updated
						if len(want["ns/"+name]) == 0 {
							typ = source.Added
						}
						st.OnDelta(delta(name, rv, typ))
						want["ns/"+name] = append(want["ns/"+name], rv)
					}
				}
			}

			feed(2)
			st.drain(t, time.Minute)
			hits, end := tt.outage(t, c, c.LeaderFor("kube.configmaps", 0))
			feed(2) // during the outage
			fed := len(want) * 4
			deadline := time.Now().Add(time.Minute)
			for hits() < 10 && !(tt.mayMiss && st.acks.count() == fed) {
				if time.Now().After(deadline) {
					t.Fatalf("the outage was never felt: %d writes turned away, %d of %d deltas acknowledged", hits(), st.acks.count(), fed)
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("the broker turned away %d writes", hits())
			feed(2) // still during the outage
			start := time.Now()
			end()
			st.drain(t, 2*time.Minute)
			t.Logf("recovered in %s; pipeline %+v", time.Since(start).Round(time.Millisecond), st.Stats())
			feed(1) // after the outage
			st.drain(t, time.Minute)

			total := 0
			for _, rvs := range want {
				total += len(rvs)
			}
			if n := st.acks.count(); n != total {
				t.Errorf("%d deltas acknowledged, want %d", n, total)
			}
			h := histories(t, c.ReadAll("kube.configmaps"))
			for _, p := range h.problems {
				t.Error(p)
			}
			repeated := 0
			for key, rvs := range want {
				got := h.rvs[key]
				unique := slices.Compact(slices.Clone(got))
				repeated += len(got) - len(unique)
				switch {
				case !slices.Equal(unique, rvs):
					t.Errorf("%s: log has resourceVersions %v, want %v in this order", key, got, rvs)
				case !tt.repeats && len(got) != len(rvs):
					t.Errorf("%s: log has resourceVersions %v, want each once: %v", key, got, rvs)
				}
			}
			t.Logf("%d deltas of %d objects, %d repeated right after themselves", total, objects, repeated)
		})
	}
}
