package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestFileCommitLoad(t *testing.T) {
	tests := []struct {
		name     string
		commits  [][]Record
		resource string
		want     Snapshot
	}{
		{
			name:     "nothing stored",
			resource: "configmaps",
			want:     Snapshot{},
		},
		{
			name: "round trip",
			commits: [][]Record{{
				put("configmaps", "ns/a", "ua", "5"),
				put("configmaps", "ns/b", "ub", "7"),
				put("configmaps", "ns/c/with/slashes", "uc", "6"),
			}},
			resource: "configmaps",
			want: Snapshot{
				Objects: map[string]Position{
					"ns/a":              {UID: "ua", ResourceVersion: "5"},
					"ns/b":              {UID: "ub", ResourceVersion: "7"},
					"ns/c/with/slashes": {UID: "uc", ResourceVersion: "6"},
				},
				LastResourceVersion: "7",
			},
		},
		{
			name: "cluster-scoped key",
			commits: [][]Record{{
				put("namespaces", "kube-system", "u1", "3"),
			}},
			resource: "namespaces",
			want: Snapshot{
				Objects:             map[string]Position{"kube-system": {UID: "u1", ResourceVersion: "3"}},
				LastResourceVersion: "3",
			},
		},
		{
			name: "delete removes key and counts toward last resource version",
			commits: [][]Record{
				{put("configmaps", "ns/a", "ua", "5"), put("configmaps", "ns/b", "ub", "6")},
				{del("configmaps", "ns/a", "ua", "8")},
			},
			resource: "configmaps",
			want: Snapshot{
				Objects:             map[string]Position{"ns/b": {UID: "ub", ResourceVersion: "6"}},
				LastResourceVersion: "8",
			},
		},
		{
			name:     "delete of unknown key",
			commits:  [][]Record{{del("configmaps", "ns/gone", "u", "4")}},
			resource: "configmaps",
			want:     Snapshot{LastResourceVersion: "4"},
		},
		{
			name: "later record wins within one commit",
			commits: [][]Record{{
				put("configmaps", "ns/a", "u1", "5"),
				put("configmaps", "ns/a", "u1", "6"),
				del("configmaps", "ns/b", "u2", "7"),
				put("configmaps", "ns/b", "u3", "8"),
				put("configmaps", "ns/c", "u4", "9"),
				del("configmaps", "ns/c", "u4", "10"),
			}},
			resource: "configmaps",
			want: Snapshot{
				Objects: map[string]Position{
					"ns/a": {UID: "u1", ResourceVersion: "6"},
					"ns/b": {UID: "u3", ResourceVersion: "8"},
				},
				LastResourceVersion: "10",
			},
		},
		{
			name: "last resource version is a numeric max",
			commits: [][]Record{
				{put("configmaps", "ns/a", "ua", "10"), put("configmaps", "ns/b", "ub", "9")},
				{put("configmaps", "ns/c", "uc", "8")},
			},
			resource: "configmaps",
			want: Snapshot{
				Objects: map[string]Position{
					"ns/a": {UID: "ua", ResourceVersion: "10"},
					"ns/b": {UID: "ub", ResourceVersion: "9"},
					"ns/c": {UID: "uc", ResourceVersion: "8"},
				},
				LastResourceVersion: "10",
			},
		},
		{
			name: "opaque resource version: newer record wins",
			commits: [][]Record{
				{put("widgets.example.com", "a", "ua", "zz"), put("widgets.example.com", "b", "ub", "aa")},
			},
			resource: "widgets.example.com",
			want: Snapshot{
				Objects: map[string]Position{
					"a": {UID: "ua", ResourceVersion: "zz"},
					"b": {UID: "ub", ResourceVersion: "aa"},
				},
				LastResourceVersion: "aa",
			},
		},
		{
			name: "resources are separate",
			commits: [][]Record{{
				put("configmaps", "ns/a", "u1", "50"),
				put("deployments.apps", "ns/a", "u2", "40"),
				put("configmaps", "ns/b", "u3", "30"),
				put("meta", "x", "u4", "60"),
			}},
			resource: "deployments.apps",
			want: Snapshot{
				Objects:             map[string]Position{"ns/a": {UID: "u2", ResourceVersion: "40"}},
				LastResourceVersion: "40",
			},
		},
		{
			name:     "resource named like the meta bucket",
			commits:  [][]Record{{put("configmaps", "ns/a", "u1", "50"), put("meta", "x", "u4", "60")}},
			resource: "meta",
			want: Snapshot{
				Objects:             map[string]Position{"x": {UID: "u4", ResourceVersion: "60"}},
				LastResourceVersion: "60",
			},
		},
		{
			name:     "empty commit",
			commits:  [][]Record{{}, nil},
			resource: "configmaps",
			want:     Snapshot{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := openTemp(t)
			for i, recs := range tt.commits {
				if err := f.Commit(context.Background(), recs); err != nil {
					t.Fatalf("Commit #%d: %v", i, err)
				}
			}
			assertSnapshot(t, mustLoad(t, f, tt.resource), tt.want)
		})
	}
}

func TestFileReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.db")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := []Record{put("configmaps", "ns/a", "ua", "5"), put("secrets", "ns/s", "us", "6")}
	if err := f.Commit(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := f.Load(context.Background(), "configmaps"); err == nil {
		t.Error("Load after Close: no error")
	}
	if err := f.Commit(context.Background(), recs); err == nil || !strings.HasPrefix(err.Error(), "checkpoint: ") {
		t.Errorf("Commit after Close: err = %v, want checkpoint error", err)
	}

	f, err = OpenFile(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer f.Close()
	assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{
		Objects:             map[string]Position{"ns/a": {UID: "ua", ResourceVersion: "5"}},
		LastResourceVersion: "5",
	})
	assertSnapshot(t, mustLoad(t, f, "secrets"), Snapshot{
		Objects:             map[string]Position{"ns/s": {UID: "us", ResourceVersion: "6"}},
		LastResourceVersion: "6",
	})
}

func TestOpenFileLocked(t *testing.T) {
	first, path := openTemp(t)

	start := time.Now()
	second, err := OpenFile(path)
	if err == nil {
		second.Close()
		t.Fatal("second OpenFile on the same path succeeded")
	}
	t.Logf("second OpenFile failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("err = %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("checkpoint: open %s: file is locked by another process", path)
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}

	// The first one is unaffected.
	if err := first.Commit(context.Background(), []Record{put("configmaps", "ns/a", "u", "1")}); err != nil {
		t.Errorf("Commit on first: %v", err)
	}
}

func TestOpenFileErrors(t *testing.T) {
	dir := t.TempDir()
	notBolt := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(notBolt, []byte(strings.Repeat("not a bolt file\n", 1024)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
	}{
		{"missing directory", filepath.Join(dir, "missing", "checkpoint.db")},
		{"not a bbolt file", notBolt},
		{"directory", dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := OpenFile(tt.path)
			if err == nil {
				f.Close()
				t.Fatal("OpenFile succeeded")
			}
			if want := "checkpoint: open " + tt.path + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("err = %q, want prefix %q", err, want)
			}
		})
	}
}

func TestFileLoadCorrupt(t *testing.T) {
	f, _ := openTemp(t)
	if err := f.Commit(context.Background(), []Record{put("configmaps", "ns/good", "u", "1")}); err != nil {
		t.Fatal(err)
	}
	// Damage one value behind the Store's back.
	err := f.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(objectsBucket("configmaps")).Put([]byte("ns/bad"), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Load(context.Background(), "configmaps")
	if err == nil {
		t.Fatal("Load of a corrupt value succeeded")
	}
	for _, want := range []string{"checkpoint: ", "configmaps", `"ns/bad"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to mention %s", err, want)
		}
	}
	// Other resources still load.
	mustLoad(t, f, "secrets")
}

func TestFileCommitRejected(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		records []Record
		wantErr error
	}{
		{"empty resource", context.Background(), []Record{put("configmaps", "ns/a", "u", "1"), put("", "ns/b", "u", "2")}, errEmptyResource},
		{"empty key", context.Background(), []Record{put("configmaps", "ns/a", "u", "1"), put("configmaps", "", "u", "2")}, errEmptyKey},
		{"canceled context", canceled, []Record{put("configmaps", "ns/a", "u", "1")}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := openTemp(t)
			err := f.Commit(tt.ctx, tt.records)
			if err == nil {
				t.Fatal("Commit succeeded")
			}
			if !strings.HasPrefix(err.Error(), "checkpoint: ") {
				t.Errorf("err = %q, want prefix %q", err, "checkpoint: ")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			// Nothing of the batch was applied.
			assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{})
		})
	}
	t.Run("load with empty resource", func(t *testing.T) {
		f, _ := openTemp(t)
		if _, err := f.Load(context.Background(), ""); !errors.Is(err, errEmptyResource) {
			t.Errorf("err = %v, want %v", err, errEmptyResource)
		}
		if _, err := f.Load(canceled, "configmaps"); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want %v", err, context.Canceled)
		}
	})
}

// BenchmarkFileCommit commits batches of 1,000 records, each to an fsync'd
// file. Keys cycle over 100,000 objects, so after the first 100 batches every
// record updates an existing key, as in steady state.
func BenchmarkFileCommit(b *testing.B) {
	const (
		batchSize = 1000
		objects   = 100_000
	)
	f, _ := openTemp(b)
	ctx := context.Background()
	keys := make([]string, objects)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%03d/configmap-%06d", i%100, i)
	}
	batch := make([]Record, batchSize)
	rv := 0
	for b.Loop() {
		for i := range batch {
			rv++
			batch[i] = put("configmaps", keys[rv%objects], "6f1c2d3e-0000-4000-8000-000000000000", strconv.Itoa(rv))
		}
		if err := f.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "records/s")
}

// TestFileCommitLastResourceVersionInRecordOrder commits records whose
// resourceVersions are not comparable, in an order that is not the order
// of their keys: the later record's resourceVersion is the resource's
// LastResourceVersion, as LaterResourceVersion rules and the other stores
// keep it, whatever the order the file writes the keys in.
func TestFileCommitLastResourceVersionInRecordOrder(t *testing.T) {
	f, _ := openTemp(t)
	err := f.Commit(t.Context(), []Record{
		put("configmaps", "ns/z", "uz", "opaque-1"),
		put("secrets", "ns/s", "us", "12"),
		put("configmaps", "ns/a", "ua", "opaque-2"),
		del("configmaps", "ns/m", "um", "opaque-3"),
		put("configmaps", "ns/b", "ub", ""),
		put("secrets", "ns/r", "ur", "11"),
	})
	if err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{
		Objects: map[string]Position{
			"ns/z": {UID: "uz", ResourceVersion: "opaque-1"},
			"ns/a": {UID: "ua", ResourceVersion: "opaque-2"},
			"ns/b": {UID: "ub"},
		},
		LastResourceVersion: "opaque-3",
	})
	assertSnapshot(t, mustLoad(t, f, "secrets"), Snapshot{
		Objects: map[string]Position{
			"ns/s": {UID: "us", ResourceVersion: "12"},
			"ns/r": {UID: "ur", ResourceVersion: "11"},
		},
		LastResourceVersion: "12",
	})
}
