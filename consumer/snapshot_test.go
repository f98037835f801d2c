package consumer

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSnapshotResume: an informer stopped and started again on a new
// ListerWatcher with the same snapshot file resumes from its position:
// no list of the bus, the changes made while it was down arrive, and
// the deletes among them reach the handlers with the object's last state.
func TestSnapshotResume(t *testing.T) {
	log := newFakeLog()
	file := filepath.Join(t.TempDir(), "configmaps.snap")
	a1, b1, c1 := cm("a", "a", 10), cm("b", "b", 11), cm("c", "c", 12)
	log.append(rec("added", a1), rec("added", b1), rec("added", c1))
	opts := testOptions()
	opts.SnapshotFile = file

	lw1 := newLW(t, log, opts)
	inf, c, stop := runInformer(t, lw1, 0)
	a2 := cm("a", "a", 13)
	log.append(rec("updated", a2))
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a2), "ns/b": seenOf(b1), "ns/c": seenOf(c1)})
	stop()
	if err := lw1.Close(); err != nil {
		t.Fatal(err)
	}
	reads := log.reads.Load()

	// While it is down: b changes, c is deleted and only its tombstone
	// is followed, d is created.
	b2, d1 := cm("b", "b", 14), cm("d", "d", 15)
	log.append(rec("updated", b2), tombstone(c1), rec("added", d1))

	lw2 := newLW(t, log, opts)
	inf2, c2, _ := runInformer(t, lw2, 0)
	want := map[string]seen{"ns/a": seenOf(a2), "ns/b": seenOf(b2), "ns/d": seenOf(d1)}
	converges(t, inf2, c2, want)
	if st := lw2.Stats(); st.SnapshotLists != 1 || st.BusLists != 0 {
		t.Errorf("stats %+v: want 1 snapshot list and no bus list", st)
	}
	if n := log.reads.Load(); n != reads {
		t.Errorf("the bus's state was read %d times on resume", n-reads)
	}

	// The resumed watch goes on; a tombstone of a held object hands the
	// handlers the object's last state, kept in the snapshot.
	lastc := make(chan map[string]any, 1)
	if _, err := inf2.AddEventHandler(deleteRecorder(func(o map[string]any) { lastc <- o })); err != nil {
		t.Fatal(err)
	}
	log.append(tombstone(d1))
	delete(want, "ns/d")
	converges(t, inf2, c2, want)
	last := <-lastc
	if _, unknown := annotations(last)[AnnotationFinalStateUnknown]; unknown || last["data"] == nil {
		t.Errorf("delete of d carried %v, want its last state", last)
	}
}

// TestSnapshotDamaged: a snapshot file that is not one is set aside, and
// the informer lists the bus.
func TestSnapshotDamaged(t *testing.T) {
	log := newFakeLog()
	a1 := cm("a", "a", 10)
	log.append(rec("added", a1))
	file := filepath.Join(t.TempDir(), "configmaps.snap")
	if err := os.WriteFile(file, []byte("this is no bbolt file, not even close to one; it is long enough to be read"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.SnapshotFile = file
	l := newLW(t, log, opts)
	inf, c, _ := runInformer(t, l, 0)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a1)})
	if st := l.Stats(); st.BusLists != 1 || st.SnapshotLists != 0 || st.SnapshotErrors != 1 {
		t.Errorf("stats %+v: want 1 bus list, no snapshot list, 1 snapshot error", st)
	}
	if _, err := os.Stat(file + ".damaged"); err != nil {
		t.Errorf("damaged file not set aside: %v", err)
	}
}

// TestSnapshotExpired: a snapshot whose position the bus no longer holds
// is discarded, and the informer lists the bus.
func TestSnapshotExpired(t *testing.T) {
	log, opts := snapshotOfOneObject(t)
	a2 := cm("a", "a", 11)
	log.expire(rec("updated", a2))

	l := newLW(t, log, opts)
	inf, c, _ := runInformer(t, l, 0)
	converges(t, inf, c, map[string]seen{"ns/a": seenOf(a2)})
	if st := l.Stats(); st.BusLists != 1 || st.SnapshotLists != 0 || st.Expired != 1 {
		t.Errorf("stats %+v: want 1 bus list, no snapshot list, 1 expired", st)
	}
}

// TestSnapshotOtherOptions: a file written for another selection is not
// used.
func TestSnapshotOtherOptions(t *testing.T) {
	log, opts := snapshotOfOneObject(t)
	opts.Namespace = "elsewhere"
	l := newLW(t, log, opts)
	inf, c, _ := runInformer(t, l, 0)
	converges(t, inf, c, map[string]seen{})
	if st := l.Stats(); st.BusLists != 1 || st.SnapshotLists != 0 {
		t.Errorf("stats %+v: want 1 bus list", st)
	}
}

// snapshotOfOneObject is a bus holding one object, ns/a at 10, and the
// options of an informer that has listed it and stopped: its snapshot
// file holds the object at the bus's position.
func snapshotOfOneObject(t *testing.T) (*fakeLog, Options) {
	t.Helper()
	log := newFakeLog()
	log.append(rec("added", cm("a", "a", 10)))
	opts := testOptions()
	opts.SnapshotFile = filepath.Join(t.TempDir(), "configmaps.snap")
	lw := newLW(t, log, opts)
	_, _, stop := runInformer(t, lw, 0)
	stop()
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	return log, opts
}
