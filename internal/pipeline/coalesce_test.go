package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kubebus/bridge/source"
)

// d is shorthand for a delta of object "x" in coalesce tests; old, when
// not zero, is the resourceVersion of its OldObject.
func d(typ source.DeltaType, uid string, rv, old int) source.Delta {
	delta := mkDelta(typ, "x", uid, rv)
	if old != 0 {
		o := mkDelta(source.Updated, "x", uid, old)
		delta.OldObject = o.Object
	}
	return delta
}

func snap(delta source.Delta) source.Delta {
	delta.Snapshot = true
	return delta
}

// describe is a delta as "type uid rv [old=rv] [snapshot]", with the
// versions read from the objects it carries, so that a merged delta whose
// fields and objects disagree shows up.
func describe(delta source.Delta) string {
	s := fmt.Sprintf("%s %s %s", delta.Type, delta.UID, delta.ResourceVersion)
	if delta.Object == nil {
		s += " object=nil"
	} else if got := delta.Object.GetResourceVersion(); got != delta.ResourceVersion {
		s += " object=" + got
	}
	if delta.OldObject != nil {
		s += " old=" + delta.OldObject.GetResourceVersion()
	}
	if delta.Snapshot {
		s += " snapshot"
	}
	return s
}

func TestCoalesce(t *testing.T) {
	const u1, u2 = "uid-1", "uid-2"
	tests := []struct {
		name string
		in   []source.Delta
		want []string
	}{
		{"empty", nil, nil},
		{"single", []source.Delta{d(source.Updated, u1, 5, 4)}, []string{"updated uid-1 5 old=4"}},
		{"added + updated -> added with the latest state",
			[]source.Delta{d(source.Added, u1, 1, 0), d(source.Updated, u1, 2, 1)},
			[]string{"added uid-1 2"}},
		{"added + several updates -> added with the latest state",
			[]source.Delta{d(source.Added, u1, 1, 0), d(source.Updated, u1, 2, 1), d(source.Updated, u1, 3, 2), d(source.Updated, u1, 4, 3)},
			[]string{"added uid-1 4"}},
		{"updated + updated -> updated with the latest state and the first old state",
			[]source.Delta{d(source.Updated, u1, 2, 1), d(source.Updated, u1, 3, 2)},
			[]string{"updated uid-1 3 old=1"}},
		{"updated + updated without old states",
			[]source.Delta{d(source.Updated, u1, 2, 0), d(source.Updated, u1, 3, 0), d(source.Updated, u1, 4, 0)},
			[]string{"updated uid-1 4"}},
		{"added + deleted -> deleted",
			[]source.Delta{d(source.Added, u1, 1, 0), d(source.Deleted, u1, 2, 0)},
			[]string{"deleted uid-1 2"}},
		{"updated + deleted -> deleted",
			[]source.Delta{d(source.Updated, u1, 2, 1), d(source.Deleted, u1, 3, 0)},
			[]string{"deleted uid-1 3"}},
		{"added + updated + deleted -> deleted",
			[]source.Delta{d(source.Added, u1, 1, 0), d(source.Updated, u1, 2, 1), d(source.Deleted, u1, 3, 0)},
			[]string{"deleted uid-1 3"}},
		{"nothing merges into a delete",
			[]source.Delta{d(source.Deleted, u1, 3, 0), d(source.Updated, u1, 4, 3)},
			[]string{"deleted uid-1 3", "updated uid-1 4 old=3"}},
		{"updated + added of the same uid stay apart",
			[]source.Delta{d(source.Updated, u1, 2, 1), d(source.Added, u1, 3, 0)},
			[]string{"updated uid-1 2 old=1", "added uid-1 3"}},
		{"different uids are never merged",
			[]source.Delta{d(source.Added, u1, 1, 0), d(source.Updated, u2, 2, 1)},
			[]string{"added uid-1 1", "updated uid-2 2 old=1"}},
		{"different uids, updates only",
			[]source.Delta{d(source.Updated, u1, 2, 1), d(source.Updated, u2, 3, 2), d(source.Updated, u1, 4, 3)},
			[]string{"updated uid-1 2 old=1", "updated uid-2 3 old=2", "updated uid-1 4 old=3"}},
		{"deleted and created again: each incarnation keeps its own events",
			[]source.Delta{
				d(source.Added, u1, 1, 0), d(source.Updated, u1, 2, 1), d(source.Deleted, u1, 3, 0),
				d(source.Added, u2, 4, 0), d(source.Updated, u2, 5, 4), d(source.Updated, u2, 6, 5),
			},
			[]string{"deleted uid-1 3", "added uid-2 6"}},
		{"snapshot is kept from the first",
			[]source.Delta{snap(d(source.Updated, u1, 2, 1)), d(source.Updated, u1, 3, 2)},
			[]string{"updated uid-1 3 old=1 snapshot"}},
		{"snapshot is kept from the last",
			[]source.Delta{d(source.Added, u1, 1, 0), snap(d(source.Deleted, u1, 2, 0))},
			[]string{"deleted uid-1 2 snapshot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]source.Delta(nil), tt.in...)
			out := coalesce(in)
			var got []string
			for _, delta := range out {
				got = append(got, describe(delta))
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("coalesce:\n got  %q\n want %q", got, tt.want)
			}
			// Every delta still carries an object to publish.
			for i, delta := range out {
				if delta.Object == nil {
					t.Errorf("delta %d lost its object", i)
				}
			}
			// Slots freed by merging are cleared, so that the objects they
			// held can be collected.
			for i := len(out); i < len(in); i++ {
				if in[i].Object != nil || in[i].OldObject != nil {
					t.Errorf("slot %d still holds an object after coalescing", i)
				}
			}
		})
	}
}
