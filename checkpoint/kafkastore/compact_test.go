package kafkastore

import (
	"fmt"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/kafkatest"
)

// After compaction the topic holds one record per live object (and one per
// resource), and reading it back gives the same checkpoint.
func TestCompaction(t *testing.T) {
	tests := []struct {
		name string
		// precreate makes the topic before the store opens it; nil lets the
		// store create it.
		precreate map[string]string
		// tombstones is how many tombstones compaction may keep: Kafka keeps
		// them for delete.retention.ms (a day by default).
		tombstones int
	}{
		{name: "topic the store created", tombstones: 5},
		{name: "tombstones expire at once", precreate: map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t)
			cfg := config(t, c, nil)
			topic := newTopic()
			if tt.precreate != nil {
				c.CreateTopic(topic, 1, tt.precreate)
			}
			s := open(t, cfg, topic)
			rv := 0
			next := func() string { rv++; return fmt.Sprint(rv) }
			want := map[string]checkpoint.Position{}
			var recs []checkpoint.Record
			for i := range 20 {
				r := put("configmaps", fmt.Sprintf("ns/cm-%02d", i), fmt.Sprintf("u%02d", i), next())
				recs, want[r.Key] = append(recs, r), r.Position
			}
			commit(t, s, recs...)
			for i := range 5 { // update 5
				r := put("configmaps", fmt.Sprintf("ns/cm-%02d", i), fmt.Sprintf("u%02d", i), next())
				commit(t, s, r)
				want[r.Key] = r.Position
			}
			recs = nil
			for i := 5; i < 10; i++ { // delete 5
				r := del("configmaps", fmt.Sprintf("ns/cm-%02d", i), fmt.Sprintf("u%02d", i), next())
				recs = append(recs, r)
				delete(want, r.Key)
			}
			commit(t, s, recs...)
			for i := 20; i < 25; i++ { // create 5
				r := put("configmaps", fmt.Sprintf("ns/cm-%02d", i), fmt.Sprintf("u%02d", i), next())
				commit(t, s, r)
				want[r.Key] = r.Position
			}
			// Compaction never touches the newest batch (Kafka's active
			// segment): one more commit, of another resource, closes it.
			commit(t, s, put("secrets", "ns/s", "us", next()))
			before := len(c.ReadAll(topic))

			c.Compact()
			values, tombstones, resources := map[string]int{}, 0, map[string]int{}
			after := c.ReadAll(topic)
			for _, r := range after {
				p, err := parse(r.Key, r.Value)
				switch {
				case err != nil:
					t.Fatalf("offset %d: %v", r.Offset, err)
				case p.resource != "configmaps":
				case p.key == "":
					resources[p.resource]++
				case p.deleted:
					tombstones++
				default:
					values[p.key]++
					if p.pos != want[p.key] {
						t.Errorf("%s: record %+v, want %+v", p.key, p.pos, want[p.key])
					}
				}
			}
			t.Logf("%d records before compaction, %d after: %d objects, %d tombstones", before, len(after), len(values), tombstones)
			if len(values) != len(want) {
				t.Errorf("records for %d objects, want the %d live ones", len(values), len(want))
			}
			for key, n := range values {
				if n != 1 {
					t.Errorf("%s: %d records, want 1", key, n)
				}
			}
			if tombstones > tt.tombstones {
				t.Errorf("%d tombstones left, want at most %d", tombstones, tt.tombstones)
			}
			if resources["configmaps"] != 1 {
				t.Errorf("%d records of the resource configmaps, want 1", resources["configmaps"])
			}
			assertSnapshot(t, "after compaction and reopening", load(t, open(t, cfg, topic), "configmaps"),
				checkpoint.Snapshot{Objects: want, LastResourceVersion: "35"})
		})
	}
}
