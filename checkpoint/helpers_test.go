package checkpoint

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
)

// openTemp opens a checkpoint file in a fresh temporary directory and closes
// it when the test ends.
func openTemp(tb testing.TB) (*File, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "checkpoint.db")
	f, err := OpenFile(path)
	if err != nil {
		tb.Fatalf("OpenFile: %v", err)
	}
	tb.Cleanup(func() {
		if err := f.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return f, path
}

func mustLoad(tb testing.TB, s Store, resource string) Snapshot {
	tb.Helper()
	snap, err := s.Load(context.Background(), resource)
	if err != nil {
		tb.Fatalf("Load(%q): %v", resource, err)
	}
	if snap.Objects == nil {
		tb.Fatalf("Load(%q): nil Objects map", resource)
	}
	return snap
}

func assertSnapshot(tb testing.TB, got, want Snapshot) {
	tb.Helper()
	if want.Objects == nil {
		want.Objects = map[string]Position{}
	}
	if !reflect.DeepEqual(got, want) {
		tb.Errorf("snapshot:\n got  %+v\n want %+v", got, want)
	}
}

func put(resource, key, uid, rv string) Record {
	return Record{Resource: resource, Key: key, Position: Position{UID: uid, ResourceVersion: rv}}
}

func del(resource, key, uid, rv string) Record {
	r := put(resource, key, uid, rv)
	r.Deleted = true
	return r
}
