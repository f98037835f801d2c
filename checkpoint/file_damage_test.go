package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeCheckpoint makes a closed checkpoint file of objects objects spread
// over two resources, big enough for branch pages and a freelist, and
// returns its path, the ids and types of the pages in use, the page size
// and how far the pages reach.
func writeCheckpoint(t *testing.T, objects int) (path string, pages map[int]string, pageSize, dataSize int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "checkpoint.db")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for start := 0; start < objects; start += 500 {
		var batch []Record
		for i := start; i < min(start+500, objects); i++ {
			res := []string{"configmaps", "secrets"}[i%2]
			batch = append(batch, put(res, fmt.Sprintf("team-%02d/object-%06d", i%7, i), fmt.Sprintf("uid-%06d", i), fmt.Sprint(1000+i)))
		}
		if err := f.Commit(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Updates of objects already stored free pages, so that the file has
	// a freelist with something in it.
	if err := f.Commit(ctx, []Record{put("configmaps", "team-00/object-000000", "uid-000000", "99999")}); err != nil {
		t.Fatal(err)
	}
	pages = map[int]string{}
	pageSize = f.db.Info().PageSize
	err = f.db.View(func(tx *bolt.Tx) error {
		dataSize = int(tx.Size())
		for id := 2; id < dataSize/pageSize; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info != nil && info.Type != "free" {
				pages[id] = info.Type
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, pages, pageSize, dataSize
}

// overwrite writes n random bytes from seed at offset of the file at path.
func overwrite(t *testing.T, path string, offset int64, n int, seed uint64) {
	t.Helper()
	junk := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(junk, offset); err != nil {
		t.Fatal(err)
	}
}

// useDamaged opens the damaged file at path and, if that succeeds, uses
// it as the bridge would. It fails the test on a panic (the test binary
// dies of one anyway) and returns the first error.
func useDamaged(t *testing.T, path string) error {
	t.Helper()
	f, err := OpenFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx := context.Background()
	for _, res := range []string{"configmaps", "secrets"} {
		if _, err := f.Load(ctx, res); err != nil {
			return err
		}
	}
	return f.Commit(ctx, []Record{put("configmaps", "team-01/new", "u-new", "200000"), put("secrets", "team-03/object-000003", "uid-000003", "200001")})
}

// assertUnreadable checks that err reports the file at path as
// unreadable, with what to do about it.
func assertUnreadable(t *testing.T, err error, path string, want error) {
	t.Helper()
	if err == nil {
		t.Fatal("the damaged checkpoint was used without an error")
	}
	t.Log(err)
	if !errors.Is(err, want) {
		t.Errorf("err = %v\nwant it to wrap %v", err, want)
	}
	for _, s := range []string{"checkpoint: ", path, "move it aside"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %q\nwant it to mention %q", err, s)
		}
	}
}

func TestFileRandomBytesOverPages(t *testing.T) {
	path, pages, pageSize, _ := writeCheckpoint(t, 3000)
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, typ := range pages {
		kinds[typ] = true
	}
	for _, typ := range []string{"freelist", "branch", "leaf"} {
		if !kinds[typ] {
			t.Fatalf("the file has no %s page to damage; pages in use: %v", typ, pages)
		}
	}
	type damage struct {
		name   string
		offset int64
		n      int
	}
	var cases []damage
	leaves := 0
	for _, id := range slices.Sorted(maps.Keys(pages)) {
		typ := pages[id]
		// Every branch page, the freelist and a few leaves.
		if typ == "leaf" {
			if leaves++; leaves%8 != 1 {
				continue
			}
		}
		// The whole page; its header with the first elements; and the
		// first elements alone, behind an intact header.
		cases = append(cases,
			damage{fmt.Sprintf("%s page %d whole", typ, id), int64(id * pageSize), pageSize},
			damage{fmt.Sprintf("%s page %d header", typ, id), int64(id * pageSize), 64},
			damage{fmt.Sprintf("%s page %d elements", typ, id), int64(id*pageSize + 16), 64})
	}
	// Both meta pages: there is no good copy left.
	cases = append(cases, damage{"both meta pages", 0, 2 * pageSize})
	for _, c := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s seed %d", c.name, seed), func(t *testing.T) {
				// A new file each time: a File broken by a panic keeps the
				// old one locked until the process ends.
				path := filepath.Join(t.TempDir(), "checkpoint.db")
				if err := os.WriteFile(path, clean, 0o600); err != nil {
					t.Fatal(err)
				}
				overwrite(t, path, c.offset, c.n, seed)
				assertUnreadable(t, useDamaged(t, path), path, ErrCorrupt)
			})
		}
	}
}

func TestFileEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	assertUnreadable(t, useDamaged(t, path), path, ErrEmpty)
	// The file was left as it was, for whoever looks into it.
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file afterwards: %v, %v; want it still there and empty", fi, err)
	}
}

func TestFileTruncated(t *testing.T) {
	path, _, pageSize, dataSize := writeCheckpoint(t, 3000)
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{100, pageSize, 2 * pageSize, 3 * pageSize, dataSize / 2, dataSize - pageSize} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.db")
			if err := os.WriteFile(path, clean[:size], 0o600); err != nil {
				t.Fatal(err)
			}
			assertUnreadable(t, useDamaged(t, path), path, ErrCorrupt)
		})
	}
}

func TestFileSetAside(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 23, 10, 15, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name     string
		contents []byte
		want     error
	}{
		{"empty", nil, ErrEmpty},
		{"corrupt", []byte(strings.Repeat("not a checkpoint\n", 1024)), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".db")
			if err := os.WriteFile(path, tt.contents, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenFile(path); !errors.Is(err, tt.want) {
				t.Fatalf("OpenFile: %v, want %v", err, tt.want)
			}
			// Twice in the same second: the second gets a name of its own.
			var asides []string
			for range 2 {
				aside, err := SetAside(path, now)
				if err != nil {
					t.Fatal(err)
				}
				asides = append(asides, aside)
				if err := os.WriteFile(path, tt.contents, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			wantNames := []string{path + ".unreadable-20261123T091500Z", path + ".unreadable-20261123T091500Z-1"}
			if !slices.Equal(asides, wantNames) {
				t.Errorf("set aside as %q, want %q", asides, wantNames)
			}
			for _, aside := range asides {
				if got, err := os.ReadFile(aside); err != nil || string(got) != string(tt.contents) {
					t.Errorf("%s: %d bytes, %v; want the file as it was", aside, len(got), err)
				}
			}
			// With the file set aside, the checkpoint starts afresh.
			if _, err := SetAside(path, now); err != nil {
				t.Fatal(err)
			}
			f, err := OpenFile(path)
			if err != nil {
				t.Fatalf("OpenFile after SetAside: %v", err)
			}
			defer f.Close()
			if err := f.Commit(context.Background(), []Record{put("configmaps", "ns/a", "u", "1")}); err != nil {
				t.Fatal(err)
			}
			assertSnapshot(t, mustLoad(t, f, "configmaps"), Snapshot{Objects: map[string]Position{"ns/a": {UID: "u", ResourceVersion: "1"}}, LastResourceVersion: "1"})
		})
	}
}

// TestFileCreateWhole: a new checkpoint file appears whole or not at all,
// so an empty file is never one the bridge left. Making it touches no
// other file: not a "checkpoint.db.new" that another process may be
// writing at that moment (or that an earlier release left after a crash),
// and no temporary file of its own is left.
func TestFileCreateWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.db")
	other := path + ".new"
	if err := os.WriteFile(other, []byte("half a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"checkpoint.db", "checkpoint.db.new"}) {
		t.Errorf("directory holds %q, want the checkpoint and the other process's file", names)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "half a file" {
		t.Errorf("the other process's file: %q, %v; want it untouched", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("new checkpoint: %v, %v; want a file with its first pages", fi, err)
	}
}

// TestFileCreateConcurrent: of several creators of one new file, each
// ends with a whole checkpoint at path (its own or another's), and no
// temporary file is left.
func TestFileCreateConcurrent(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, "checkpoint.db")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = create(path) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: creator %d: %v", round, i, err)
			}
		}
		f, err := OpenFile(path)
		if err != nil {
			t.Fatalf("round %d: the file made: %v", round, err)
		}
		f.Close()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("round %d: directory holds %q, want only the checkpoint", round, names)
		}
	}
}

// TestFileSize: the file grows with what it holds, not by bbolt's 16 MiB
// steps.
func TestFileSize(t *testing.T) {
	f, path := openTemp(t)
	var batch []Record
	for i := range 5 {
		batch = append(batch, put("configmaps", fmt.Sprintf("ns/cm-%d", i), "6f1c2d3e-0000-4000-8000-000000000000", fmt.Sprint(i+1)))
	}
	if err := f.Commit(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a checkpoint of 5 objects: %d bytes", fi.Size())
	if fi.Size() > 2<<20 {
		t.Errorf("a checkpoint of 5 objects is %d bytes, want at most 2 MiB", fi.Size())
	}
}
