package kafkastore

import (
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/kafkatest"
)

// A position's View goes through Commit and Load, from memory and read
// back from the topic, and a later record replaces it; a position without
// one is written as before, {"uid":…,"rv":…}, and loads with no View.
func TestViewRoundTrip(t *testing.T) {
	c := kafkatest.Start(t)
	cfg := config(t, c, nil)
	topic := newTopic()
	s := open(t, cfg, topic)
	withView := func(key, uid, rv, view string) checkpoint.Record {
		r := put("pods", key, uid, rv)
		r.View = view
		return r
	}
	commit(t, s,
		withView("ns/a", "ua", "5", "3f2a9c1dp.9a0b1c2d3e4f5061"),
		withView("ns/cleared", "uc", "6", "3f2a9c1d.0000000000000002"),
		put("pods", "ns/plain", "up", "7"),
	)
	commit(t, s, put("pods", "ns/cleared", "uc", "8"))
	want := checkpoint.Snapshot{LastResourceVersion: "8", Objects: map[string]checkpoint.Position{
		"ns/a":       {UID: "ua", ResourceVersion: "5", View: "3f2a9c1dp.9a0b1c2d3e4f5061"},
		"ns/cleared": {UID: "uc", ResourceVersion: "8"},
		"ns/plain":   {UID: "up", ResourceVersion: "7"},
	}}
	assertSnapshot(t, "from memory", load(t, s, "pods"), want)
	assertSnapshot(t, "after reopening", load(t, open(t, cfg, topic), "pods"), want)

	values := map[string]string{}
	for _, r := range c.ReadAll(topic) {
		values[string(r.Key)] = string(r.Value)
	}
	if got := values["pods/ns/plain"]; got != `{"uid":"up","rv":"7"}` {
		t.Errorf("a position without a View is written as %s, want it as before", got)
	}
}
