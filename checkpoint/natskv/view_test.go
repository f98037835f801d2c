package natskv

import (
	"maps"
	"strings"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/natstest"
)

func recView(resource, key, uid, rv, view string) checkpoint.Record {
	r := rec(resource, key, uid, rv)
	r.View = view
	return r
}

// A position's View goes through Commit and Load, under short and bounded
// keys, and a later record replaces it; positions without one are stored
// as before and load, next to values an earlier release wrote, with no
// View.
func TestViewRoundTrip(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "views")
	long := "ns/" + strings.Repeat("v", 2*maxKeyToken)
	if _, err := s.kv.Put(t.Context(), objectKey("pods", "ns/old"), []byte(`{"uid":"uo","rv":"3"}`)); err != nil {
		t.Fatalf("put a value of an earlier release: %v", err)
	}
	err := s.Commit(t.Context(), []checkpoint.Record{
		recView("pods", "ns/a", "ua", "5", "3f2a9c1dp.9a0b1c2d3e4f5061"),
		recView("pods", long, "ul", "6", "3f2a9c1dp.0000000000000001"),
		recView("pods", "ns/cleared", "uc", "7", "3f2a9c1d.0000000000000002"),
		rec("pods", "ns/plain", "up", "8"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), []checkpoint.Record{rec("pods", "ns/cleared", "uc", "9")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]checkpoint.Position{
		"ns/a":       {UID: "ua", ResourceVersion: "5", View: "3f2a9c1dp.9a0b1c2d3e4f5061"},
		long:         {UID: "ul", ResourceVersion: "6", View: "3f2a9c1dp.0000000000000001"},
		"ns/cleared": {UID: "uc", ResourceVersion: "9"},
		"ns/plain":   {UID: "up", ResourceVersion: "8"},
		"ns/old":     {UID: "uo", ResourceVersion: "3"},
	}
	for name, st := range map[string]*Store{"same store": s, "new store": open(t, nc, "views")} {
		if got := load(t, st, "pods").Objects; !maps.Equal(got, want) {
			t.Errorf("%s: loaded\n %+v\nwant\n %+v", name, got, want)
		}
	}
	e, err := s.kv.Get(t.Context(), objectKey("pods", "ns/plain"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Value()); got != `{"uid":"up","rv":"8"}` {
		t.Errorf("a position without a View is stored as %s, want it as before", got)
	}
}
