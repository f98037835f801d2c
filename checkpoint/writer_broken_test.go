package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// A checkpoint file damaged while the bridge runs (its pages overwritten
// behind bbolt's back) makes the next commit panic inside bbolt; the File
// turns that into ErrCorrupt and is broken from then on. No retry can fix
// it, so the Writer's Run returns the error at once instead of warning
// every interval while every object waits.
func TestWriterRunStopsOnBrokenFile(t *testing.T) {
	f, path := openTemp(t)
	var recs []Record
	for i := range 200 {
		recs = append(recs, put("configmaps", fmt.Sprintf("ns/object-%04d", i), "u", fmt.Sprint(i+1)))
	}
	if err := f.Commit(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	// Every page past the two meta pages: the root bucket's among them,
	// which the next transaction reads first.
	pageSize := f.db.Info().PageSize
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := []byte(strings.Repeat("\xff", int(fi.Size())-2*pageSize))
	if _, err := fh.WriteAt(junk, int64(2*pageSize)); err != nil {
		t.Fatal(err)
	}
	fh.Close()

	w := NewWriter(f, 10*time.Millisecond, slog.New(slog.NewTextHandler(t.Output(), nil)))
	w.Record(put("configmaps", "ns/new", "u-new", "1000"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Run = %v, want an error wrapping ErrCorrupt that names %s", err, path)
		}
		t.Log(err)
		// The next start refuses the file. (A copy: a File broken by a
		// panic keeps its file locked until the process ends.)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		next := path + ".next"
		if err := os.WriteFile(next, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if g, err := OpenFile(next); !errors.Is(err, ErrCorrupt) {
			if g != nil {
				g.Close()
			}
			t.Errorf("OpenFile after the break = %v, want ErrCorrupt", err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatalf("Writer.Run still running 5s after its store broke (final flush: %v)", <-done)
	}
}
