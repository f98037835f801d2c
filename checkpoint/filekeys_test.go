package checkpoint

import (
	"context"
	"strings"
	"testing"
)

// Object keys past bbolt's 32 KiB key limit, up to the longest name the
// API server takes, are committed among others, loaded back whole from the
// reopened file, and deleted; a key at the bound is stored as it is.
func TestFileLongKeys(t *testing.T) {
	f, path := openTemp(t)
	const resource = "clusterroles.rbac.authorization.k8s.io"
	keys := []string{
		"admin",
		strings.Repeat("a", maxFileKey),     // at the bound: kept
		strings.Repeat("b", maxFileKey+1),   // just past it
		strings.Repeat("c", 32768),          // bbolt's limit
		strings.Repeat("d", 32769),          // just past bbolt's limit
		"ns/" + strings.Repeat("e", 524216), // the longest name
	}
	var recs []Record
	for i, k := range keys {
		recs = append(recs, put(resource, k, "u"+k[:1], strings.Repeat("1", i+1)))
	}
	if err := f.Commit(context.Background(), recs); err != nil {
		t.Fatalf("Commit: %.300v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := Snapshot{LastResourceVersion: "111111", Objects: map[string]Position{}}
	for i, k := range keys {
		want.Objects[k] = Position{UID: "u" + k[:1], ResourceVersion: strings.Repeat("1", i+1)}
	}
	if got := mustLoad(t, f, resource); !sameSnapshot(got, want) {
		t.Errorf("loaded %d objects, last %s; want %d, %s", len(got.Objects), got.LastResourceVersion, len(want.Objects), want.LastResourceVersion)
	}
	if err := f.Commit(context.Background(), []Record{del(resource, keys[4], "ud", "2222222")}); err != nil {
		t.Fatalf("Commit a delete: %.300v", err)
	}
	delete(want.Objects, keys[4])
	want.LastResourceVersion = "2222222"
	if got := mustLoad(t, f, resource); !sameSnapshot(got, want) {
		t.Errorf("after the delete: %d objects, want %d", len(got.Objects), len(want.Objects))
	}
	if k := fileKey(keys[5]); len(k) > maxFileKey {
		t.Errorf("bbolt key of %d bytes", len(k))
	}
	if string(fileKey(keys[1])) != keys[1] {
		t.Error("a key at the bound is not stored as it is")
	}
}

func sameSnapshot(a, b Snapshot) bool {
	if a.LastResourceVersion != b.LastResourceVersion || len(a.Objects) != len(b.Objects) {
		return false
	}
	for k, p := range b.Objects {
		if a.Objects[k] != p {
			return false
		}
	}
	return true
}
