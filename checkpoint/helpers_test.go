package checkpoint

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"
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

// putOldForm stores key at p as releases before bounded keys did: the
// whole object key as the bbolt key, whatever its length up to bbolt's.
func putOldForm(t *testing.T, path, resource, key string, p Position) {
	t.Helper()
	putRaw(t, path, resource, map[string]string{key: string(appendPosition(nil, p))})
}

// putRaw stores values, bbolt key to bytes, in resource's bucket of the
// closed checkpoint file at path, behind the File's back: as an earlier
// release wrote them.
func putRaw(t *testing.T, path, resource string, values map[string]string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(objectsBucket(resource))
		if err != nil {
			return err
		}
		for k, v := range values {
			if err := b.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// reopen closes f, unless it is nil, and opens the file at path again,
// to be closed when the test ends.
func reopen(t *testing.T, f *File, path string) *File {
	t.Helper()
	if f != nil {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatalf("OpenFile: %.300v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
