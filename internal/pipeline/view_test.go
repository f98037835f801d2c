package pipeline

import (
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
)

func withView(delta source.Delta, view string) source.Delta {
	delta.View = view
	return delta
}

func leftFilter(delta source.Delta) source.Delta {
	delta.Reason = source.ReasonLeftFilter
	return delta
}

// The record of a published delta carries the delta's state in the view,
// so that a restart compares the object with what the view published; a
// delta without one records none.
func TestRecordCarriesView(t *testing.T) {
	s := &sinktest.Recorder{}
	h := newHarness(t, s, Options{}, nil)
	h.start(t)
	h.p.OnDelta(withView(mkDelta(source.Added, "a", "ua", 1), "3f2a9c1d.0000000000000001"))
	h.p.OnDelta(withView(mkDelta(source.Updated, "b", "ub", 2), "3f2a9c1dp.0000000000000002"))
	h.p.OnDelta(leftFilter(mkDelta(source.Deleted, "c", "uc", 3)))
	h.p.OnDelta(mkDelta(source.Updated, "d", "ud", 4))
	h.drain(t)
	h.stop(t)

	got := map[string]checkpoint.Record{}
	h.rec.mu.Lock()
	for _, r := range h.rec.recs {
		got[r.Key] = r
	}
	h.rec.mu.Unlock()
	for key, want := range map[string]checkpoint.Record{
		subject("a"): {Resource: "configmaps", Key: subject("a"), Position: checkpoint.Position{UID: "ua", ResourceVersion: "1", View: "3f2a9c1d.0000000000000001"}},
		subject("b"): {Resource: "configmaps", Key: subject("b"), Position: checkpoint.Position{UID: "ub", ResourceVersion: "2", View: "3f2a9c1dp.0000000000000002"}},
		subject("c"): {Resource: "configmaps", Key: subject("c"), Position: checkpoint.Position{UID: "uc", ResourceVersion: "3"}, Deleted: true},
		subject("d"): {Resource: "configmaps", Key: subject("d"), Position: checkpoint.Position{UID: "ud", ResourceVersion: "4"}},
	} {
		if got[key] != want {
			t.Errorf("record of %s = %+v, want %+v", key, got[key], want)
		}
	}
}

// Collapsed deltas keep the latest one's state in the view, and a delete's
// reason.
func TestCoalesceKeepsViewAndReason(t *testing.T) {
	const u1 = "uid-1"
	tests := []struct {
		name       string
		in         []source.Delta
		wantType   source.DeltaType
		wantView   string
		wantReason source.Reason
	}{
		{"added + updated: the update's view",
			[]source.Delta{withView(d(source.Added, u1, 1, 0), "v.1"), withView(d(source.Updated, u1, 2, 1), "v.2")},
			source.Added, "v.2", ""},
		{"updated + updated: the last view",
			[]source.Delta{withView(d(source.Updated, u1, 2, 1), "v.2"), withView(d(source.Updated, u1, 3, 2), "v.3"), withView(d(source.Updated, u1, 4, 3), "v.4")},
			source.Updated, "v.4", ""},
		{"view definition changed in between",
			[]source.Delta{withView(d(source.Updated, u1, 2, 1), "old.2"), withView(d(source.Updated, u1, 3, 2), "new.3")},
			source.Updated, "new.3", ""},
		{"updated + left the filter: deleted with the reason",
			[]source.Delta{withView(d(source.Updated, u1, 2, 1), "v.2"), leftFilter(d(source.Deleted, u1, 3, 0))},
			source.Deleted, "", source.ReasonLeftFilter},
		{"added + left the filter: deleted with the reason",
			[]source.Delta{withView(d(source.Added, u1, 1, 0), "v.1"), leftFilter(d(source.Deleted, u1, 2, 0))},
			source.Deleted, "", source.ReasonLeftFilter},
		{"updated + deleted in the cluster: no reason",
			[]source.Delta{withView(d(source.Updated, u1, 2, 1), "v.2"), d(source.Deleted, u1, 3, 0)},
			source.Deleted, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := coalesce(tt.in)
			if len(out) != 1 {
				t.Fatalf("coalesce made %d deltas, want 1", len(out))
			}
			if m := out[0]; m.Type != tt.wantType || m.View != tt.wantView || m.Reason != tt.wantReason {
				t.Errorf("merged: %s view %q reason %q; want %s view %q reason %q", m.Type, m.View, m.Reason, tt.wantType, tt.wantView, tt.wantReason)
			}
		})
	}
}
