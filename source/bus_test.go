package source

import (
	"maps"
	"slices"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/resourceversion"
)

func TestPriorFromBus(t *testing.T) {
	snap := checkpoint.Snapshot{LastResourceVersion: "20", Objects: map[string]checkpoint.Position{
		"a/same":    {UID: "u1", ResourceVersion: "10", View: "d.x"},
		"a/behind":  {UID: "u2", ResourceVersion: "10"},
		"a/lost":    {UID: "u3", ResourceVersion: "10"},
		"a/older":   {UID: "u4", ResourceVersion: "15"},
		"a/intent":  {UID: "u5"},
		"a/deleted": {UID: "u6", ResourceVersion: "10"},
		"a/other":   {UID: "u7", ResourceVersion: "10"},
		"b/away":    {UID: "u8", ResourceVersion: "10"},
	}}
	held := map[string]Holding{
		"a/same":    {UID: "u1", ResourceVersion: "10"},
		"a/behind":  {UID: "u2", ResourceVersion: "12", View: "d.y"},
		"a/older":   {UID: "u4", ResourceVersion: "11"},
		"a/intent":  {UID: "u5", ResourceVersion: "13", View: "d.z"},
		"a/deleted": {UID: "u6", ResourceVersion: "14", Deleted: true},
		"a/other":   {UID: "u9", ResourceVersion: "16"},
		"a/ghost":   {UID: "u10", ResourceVersion: "25"},
	}
	p := priorFromBus(snap, held, []string{"a"})
	want := map[string]checkpoint.Position{
		"a/same":   {UID: "u1", ResourceVersion: "10", View: "d.x"}, // the checkpoint's, view state and all
		"a/behind": {UID: "u2", ResourceVersion: "12", View: "d.y"}, // the bus is ahead (a crash before a flush)
		"a/older":  {UID: "u4", ResourceVersion: "11"},              // the bus holds an older state: it wins, the list repairs it
		"a/intent": {UID: "u5", ResourceVersion: "13", View: "d.z"}, // published: the bus says so, under which view
		"a/other":  {UID: "u9", ResourceVersion: "16"},
		"a/ghost":  {UID: "u10", ResourceVersion: "25"},
		"b/away":   {UID: "u8", ResourceVersion: "10"}, // a namespace not read: as the checkpoint has it
	}
	if !maps.Equal(p.Objects, want) {
		t.Errorf("positions:\n got %v\nwant %v", p.Objects, want)
	}
	if p.LastResourceVersion != "25" {
		t.Errorf("last resourceVersion %q, want the bus's newest, 25", p.LastResourceVersion)
	}
	if got := slices.Sorted(maps.Keys(p.fromBus)); !slices.Equal(got, []string{"a/ghost", "a/other"}) {
		t.Errorf("only on the bus: %v, want a/ghost and a/other", got)
	}
	// a/deleted and a/other: the bus is ahead of the checkpoint (a delete,
	// another object, published after its last flush), not behind.
	wantRepairs := map[string]Drift{"a/lost": DriftMissing, "a/older": DriftStale}
	if !maps.Equal(p.repairs, wantRepairs) {
		t.Errorf("repairs %v, want %v", p.repairs, wantRepairs)
	}
	if p.cmp.Held != 6 || p.cmp.OnlyOnBus != 4 || p.cmp.NotOnBus != 2 {
		t.Errorf("comparison %+v, want 6 held, 4 only on the bus (behind, intent, other, ghost), 2 lost by it (lost, older)", p.cmp)
	}
}

// A start repairs what the bus lost under new event ids: the states the
// list finds of objects the bus lacked or held older are marked
// reconciled.
func TestStartMarksRepairs(t *testing.T) {
	snap := checkpoint.Snapshot{LastResourceVersion: "20", Objects: map[string]checkpoint.Position{
		"ns/lost":  {UID: "u1", ResourceVersion: "10"},
		"ns/older": {UID: "u2", ResourceVersion: "15"},
		"ns/same":  {UID: "u3", ResourceVersion: "10"},
	}}
	held := map[string]Holding{
		"ns/older": {UID: "u2", ResourceVersion: "11"},
		"ns/same":  {UID: "u3", ResourceVersion: "10"},
	}
	p := priorFromBus(snap, held, nil)
	tr, got := newTestTracker(p.Objects, false)
	tr.repairs = p.repairs
	tr.replace("", items(cm("lost", "u1", "10"), cm("older", "u2", "15"), cm("same", "u3", "10")), "21")
	tr.finishInitialList()
	want := []string{"added ns/lost u1@10 snapshot reason=reconciled", "updated ns/older u2@15 snapshot reason=reconciled"}
	if s := viewSummary(*got); !slices.Equal(s, want) {
		t.Errorf("published %v, want %v", s, want)
	}
	if r := tr.startRepair(nil); r.Missing != 1 || r.Stale != 1 || r.Ghosts != 0 {
		t.Errorf("start repair %+v, want 1 missing, 1 stale", r)
	}
}

// A pass: a ghost published after the snapshot is a change under way, an
// object the cluster holds outside the selection is left alone, and a
// later state whose projection the view left unchanged is not stale.
func TestCompareBus(t *testing.T) {
	v := testView{def: "d1", projects: true}
	tr, got := newViewTracker(nil, v)
	tr.replace("", nil, "1")
	tr.finishInitialList()
	tr.addObject(viewCM(t, "kept", "u1", "10", "yes", "a", "n1"))
	tr.updateObject(viewCM(t, "kept", "u1", "12", "yes", "a", "n2")) // projection unchanged: suppressed
	tr.addObject(viewCM(t, "lost", "u2", "11", "yes", "b", "n"))
	tr.addObject(viewCM(t, "old", "u3", "13", "yes", "c", "n"))
	*got = nil
	snap := tr.inView()
	tr.foreign = map[string]string{"ns/theirs": "u9"}
	held := map[string]Holding{
		"ns/kept":   {UID: "u1", ResourceVersion: "10", View: "d1.a"},
		"ns/old":    {UID: "u3", ResourceVersion: "9", View: "d1.z"}, // an older projection
		"ns/ghost":  {UID: "u4", ResourceVersion: "8"},
		"ns/late":   {UID: "u5", ResourceVersion: "14"}, // newer than anything the snapshot knew
		"ns/theirs": {UID: "u9", ResourceVersion: "5"},
	}
	d := tr.compareBus(snap, held)
	var ghosts []string
	for _, g := range d.ghosts {
		ghosts = append(ghosts, g.key)
	}
	if !slices.Equal(ghosts, []string{"ns/ghost"}) {
		t.Errorf("ghosts %v, want ns/ghost alone", ghosts)
	}
	if !slices.Equal(d.missing, []string{"ns/lost"}) || !slices.Equal(d.stale, []string{"ns/old"}) {
		t.Errorf("missing %v and stale %v, want ns/lost and ns/old", d.missing, d.stale)
	}
	if len(*got) != 0 {
		t.Errorf("the comparison itself published %v", got.summary())
	}
	// The ghost's delete is dated at least by what the bus held of it.
	if !tr.deleteGhost(d.ghosts[0]) {
		t.Fatal("the ghost was not deleted")
	}
	if s := viewSummary(*got); len(s) != 1 || (*got)[0].Reason != ReasonReconciled || resourceversion.Before((*got)[0].ResourceVersion, "8") {
		t.Errorf("ghost delete %v, want one delete, reconciled, at 8 or later", s)
	}
}
