package kafkastore

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/kafkatest"
)

// Load answers what was committed, from memory and, after reopening, from
// the topic. The cases are checkpoint.File's.
func TestCommitLoad(t *testing.T) {
	type P = checkpoint.Position
	tests := []struct {
		name     string
		commits  [][]checkpoint.Record
		resource string
		want     checkpoint.Snapshot
	}{
		{name: "nothing stored", resource: "configmaps"},
		{
			name: "round trip",
			commits: [][]checkpoint.Record{{
				put("configmaps", "ns/a", "ua", "5"), put("configmaps", "ns/b", "ub", "7"), put("configmaps", "ns/c/with/slashes", "uc", "6"),
			}},
			resource: "configmaps",
			want: checkpoint.Snapshot{Objects: map[string]P{
				"ns/a": {UID: "ua", ResourceVersion: "5"}, "ns/b": {UID: "ub", ResourceVersion: "7"}, "ns/c/with/slashes": {UID: "uc", ResourceVersion: "6"},
			}, LastResourceVersion: "7"},
		},
		{
			name:     "cluster-scoped key",
			commits:  [][]checkpoint.Record{{put("namespaces", "kube-system", "u1", "3")}},
			resource: "namespaces",
			want:     checkpoint.Snapshot{Objects: map[string]P{"kube-system": {UID: "u1", ResourceVersion: "3"}}, LastResourceVersion: "3"},
		},
		{
			name: "delete removes key and counts toward last resource version",
			commits: [][]checkpoint.Record{
				{put("configmaps", "ns/a", "ua", "5"), put("configmaps", "ns/b", "ub", "6")},
				{del("configmaps", "ns/a", "ua", "8")},
			},
			resource: "configmaps",
			want:     checkpoint.Snapshot{Objects: map[string]P{"ns/b": {UID: "ub", ResourceVersion: "6"}}, LastResourceVersion: "8"},
		},
		{
			name:     "delete of unknown key",
			commits:  [][]checkpoint.Record{{del("configmaps", "ns/gone", "u", "4")}},
			resource: "configmaps",
			want:     checkpoint.Snapshot{LastResourceVersion: "4"},
		},
		{
			name: "later record wins within one commit",
			commits: [][]checkpoint.Record{{
				put("configmaps", "ns/a", "u1", "5"), put("configmaps", "ns/a", "u1", "6"),
				del("configmaps", "ns/b", "u2", "7"), put("configmaps", "ns/b", "u3", "8"),
				put("configmaps", "ns/c", "u4", "9"), del("configmaps", "ns/c", "u4", "10"),
			}},
			resource: "configmaps",
			want: checkpoint.Snapshot{Objects: map[string]P{
				"ns/a": {UID: "u1", ResourceVersion: "6"}, "ns/b": {UID: "u3", ResourceVersion: "8"},
			}, LastResourceVersion: "10"},
		},
		{
			name: "last resource version is a numeric max",
			commits: [][]checkpoint.Record{
				{put("configmaps", "ns/a", "ua", "10"), put("configmaps", "ns/b", "ub", "9")},
				{put("configmaps", "ns/c", "uc", "8")},
			},
			resource: "configmaps",
			want: checkpoint.Snapshot{Objects: map[string]P{
				"ns/a": {UID: "ua", ResourceVersion: "10"}, "ns/b": {UID: "ub", ResourceVersion: "9"}, "ns/c": {UID: "uc", ResourceVersion: "8"},
			}, LastResourceVersion: "10"},
		},
		{
			name:     "opaque resource version: newer record wins",
			commits:  [][]checkpoint.Record{{put("widgets.example.com", "a", "ua", "zz"), put("widgets.example.com", "b", "ub", "aa")}},
			resource: "widgets.example.com",
			want: checkpoint.Snapshot{Objects: map[string]P{
				"a": {UID: "ua", ResourceVersion: "zz"}, "b": {UID: "ub", ResourceVersion: "aa"},
			}, LastResourceVersion: "aa"},
		},
		{
			name: "resources are separate",
			commits: [][]checkpoint.Record{{
				put("configmaps", "ns/a", "u1", "50"), put("deployments.apps", "ns/a", "u2", "40"), put("configmaps", "ns/b", "u3", "30"),
			}},
			resource: "deployments.apps",
			want:     checkpoint.Snapshot{Objects: map[string]P{"ns/a": {UID: "u2", ResourceVersion: "40"}}, LastResourceVersion: "40"},
		},
		{name: "empty commit", commits: [][]checkpoint.Record{{}, nil}, resource: "configmaps"},
	}
	c := kafkatest.Start(t)
	cfg := config(t, c, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := newTopic()
			s := open(t, cfg, topic)
			for _, recs := range tt.commits {
				commit(t, s, recs...)
			}
			assertSnapshot(t, "from memory", load(t, s, tt.resource), tt.want)
			assertSnapshot(t, "after reopening", load(t, open(t, cfg, topic), tt.resource), tt.want)
		})
	}
}

func TestCommitRejected(t *testing.T) {
	c := kafkatest.Start(t)
	s := open(t, config(t, c, nil), newTopic())
	commit(t, s, put("configmaps", "ns/a", "u", "1"))
	for _, recs := range [][]checkpoint.Record{
		{put("", "ns/a", "u", "2")},
		{put("configmaps", "", "u", "2")},
		{put("pods/status", "ns/a", "u", "2")},
		{put("configmaps", "ns/b", "u", "2"), put("configmaps", "", "u", "3")},
	} {
		if err := s.Commit(t.Context(), recs); err == nil {
			t.Errorf("Commit(%+v) succeeded, want an error", recs)
		}
	}
	assertSnapshot(t, "after rejected commits", load(t, s, "configmaps"),
		checkpoint.Snapshot{Objects: map[string]checkpoint.Position{"ns/a": {UID: "u", ResourceVersion: "1"}}, LastResourceVersion: "1"})
}

// Commits and Loads from several goroutines at once all land.
func TestConcurrentUse(t *testing.T) {
	c := kafkatest.Start(t)
	cfg := config(t, c, nil)
	topic := newTopic()
	s := open(t, cfg, topic)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				if err := s.Commit(t.Context(), []checkpoint.Record{put("configmaps", fmt.Sprintf("ns/w%d-%d", w, i), "u", fmt.Sprint(w*100+i))}); err != nil {
					t.Error(err)
				}
				if _, err := s.Load(t.Context(), "configmaps"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for name, st := range map[string]*Store{"from memory": s, "after reopening": open(t, cfg, topic)} {
		snap := load(t, st, "configmaps")
		if len(snap.Objects) != 40 || snap.LastResourceVersion != "309" {
			t.Errorf("%s: %d objects, last resourceVersion %s; want 40 and 309", name, len(snap.Objects), snap.LastResourceVersion)
		}
	}
}

// A record larger than BRIDGE_KAFKA_MAX_MESSAGE_BYTES (the position of an
// object whose name alone passes it) can never be written: Commit drops it,
// logs it, and writes the rest, instead of failing every flush from then
// on.
func TestRecordPastMaxMessageBytes(t *testing.T) {
	c := kafkatest.Start(t)
	cfg := config(t, c, map[string]string{"BRIDGE_KAFKA_MAX_MESSAGE_BYTES": "65536"})
	topic := newTopic()
	var dropped []string // only Commit calls it, and Commits are serialised
	s := open(t, cfg, topic, func(resource string) { dropped = append(dropped, resource) })
	const resource = "roles.rbac.authorization.k8s.io"
	huge := "team-a/" + strings.Repeat("h", 100_000)
	commit(t, s, put(resource, "team-a/before", "ua", "1"), put(resource, huge, "uh", "2"), put(resource, "team-a/after", "ub", "3"))
	if !slices.Equal(dropped, []string{resource}) {
		t.Errorf("dropped records reported: %q, want the one of %s", dropped, resource)
	}
	want := checkpoint.Snapshot{LastResourceVersion: "3", Objects: map[string]checkpoint.Position{
		"team-a/before": {UID: "ua", ResourceVersion: "1"},
		"team-a/after":  {UID: "ub", ResourceVersion: "3"},
	}}
	assertSnapshot(t, "in memory", load(t, s, resource), want)
	assertSnapshot(t, "read back", load(t, open(t, cfg, topic), resource), want)
	commit(t, s, del(resource, huge, "uh", "4"))
}
