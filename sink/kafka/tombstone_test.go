package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/wire"
)

// Two bridges of two clusters may write to one topic (the history layout,
// or one BRIDGE_KAFKA_TOPIC): keys name only the object, so each
// tombstone names its cluster, and the object it follows, in headers,
// in both layouts and both modes. It carries no header that would make
// it pass for an event (no content-type, ce_specversion, ce_id, ce_type).
func TestTombstonesNameTheirCluster(t *testing.T) {
	for _, layout := range []Layout{LayoutState, LayoutHistory} {
		for _, mode := range []CEMode{ModeStructured, ModeBinary} {
			t.Run(fmt.Sprintf("%s/%s", layout, mode), func(t *testing.T) {
				c := kafkatest.Start(t)
				s := newSink(t, clusterConfig(t, c, map[string]string{
					"BRIDGE_KAFKA_LAYOUT": string(layout), "BRIDGE_KAFKA_CE_MODE": string(mode), "BRIDGE_KAFKA_PARTITIONS": "1",
				}), configmaps)
				var in []*wire.Message
				for _, cluster := range []string{"east", "west"} {
					for _, m := range []*wire.Message{
						message(configmaps, "ns", "a", "added", 1),
						message(configmaps, "ns", "a", "deleted", 2),
						message(configmaps, "", "wide", "deleted", 3),
					} {
						m.Cluster = cluster
						m.Source = "/clusters/" + cluster + "/api/v1/configmaps"
						m.UID = cluster + "-" + m.UID
						in = append(in, m)
					}
				}
				for _, m := range in {
					if err := s.Publish(t.Context(), []*wire.Message{m}); err != nil {
						t.Fatal(err)
					}
				}
				var got []string
				for _, r := range c.ReadAll("kube.configmaps") {
					if r.Value != nil {
						continue
					}
					h := headersOf(r)
					got = append(got, fmt.Sprintf("%s %s %s %s", r.Key, h["ce_cluster"], h["ce_source"], h["ce_uid"]))
					for _, k := range []string{"content-type", "ce_specversion", "ce_id", "ce_type"} {
						if v, ok := h[k]; ok {
							t.Errorf("tombstone %s carries %s %q; want none, so that it is never taken for an event", r.Key, k, v)
						}
					}
				}
				want := []string{
					"ns/a east /clusters/east/api/v1/configmaps east-uid-ns/a",
					"wide east /clusters/east/api/v1/configmaps east-uid-wide",
					"ns/a west /clusters/west/api/v1/configmaps west-uid-ns/a",
					"wide west /clusters/west/api/v1/configmaps west-uid-wide",
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("tombstones (key cluster source uid):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}
