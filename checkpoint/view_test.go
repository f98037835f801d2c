package checkpoint

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// withView is put with a View.
func withView(resource, key, uid, rv, view string) Record {
	r := put(resource, key, uid, rv)
	r.View = view
	return r
}

// The file writes a position with a View as json.Marshal writes it, which
// is what the other stores write, and without one exactly as before.
func TestAppendPositionView(t *testing.T) {
	for _, p := range []Position{
		{UID: "u1", ResourceVersion: "5"},
		{UID: "u1"},
		{UID: "u1", ResourceVersion: "5", View: "3f2a9c1dp.9a0b1c2d3e4f5061"},
		{UID: "u1", ResourceVersion: "5", View: `odd "view" <&> \ é`},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got := appendPosition(nil, p)
		// json.Marshal escapes <, > and & for HTML; the file does not, and
		// both decode alike.
		want = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want)))
		if string(got) != string(want) {
			t.Errorf("appendPosition(%+v) = %s, want %s", p, got, want)
		}
		back, err := DecodePosition(got)
		if err != nil || back != p {
			t.Errorf("DecodePosition(%s) = %+v, %v; want %+v", got, back, err, p)
		}
	}
	if got := string(appendPosition(nil, Position{UID: "u1", ResourceVersion: "5"})); got != `{"uid":"u1","rv":"5"}` {
		t.Errorf("a position without a View is stored as %s, want it as before: {\"uid\":\"u1\",\"rv\":\"5\"}", got)
	}
}

// A View goes through Commit and Load, for short and long keys, survives
// a reopen, and is replaced (or cleared) by the object's next record.
func TestFileViewRoundTrip(t *testing.T) {
	long := "ns/" + strings.Repeat("n", 2*maxFileKey)
	path := filepath.Join(t.TempDir(), "checkpoint.db")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = f.Commit(ctx, []Record{
		withView("configmaps", "ns/a", "ua", "5", "3f2a9c1dp.9a0b1c2d3e4f5061"),
		withView("configmaps", long, "ul", "6", "3f2a9c1dp.0000000000000001"),
		withView("configmaps", "ns/cleared", "uc", "7", "3f2a9c1d.0000000000000002"),
		put("configmaps", "ns/plain", "up", "8"),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Commit(ctx, []Record{
		withView("configmaps", "ns/a", "ua", "9", "3f2a9c1dp.1111111111111111"),
		put("configmaps", "ns/cleared", "uc", "10"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{
		Objects: map[string]Position{
			"ns/a":       {UID: "ua", ResourceVersion: "9", View: "3f2a9c1dp.1111111111111111"},
			long:         {UID: "ul", ResourceVersion: "6", View: "3f2a9c1dp.0000000000000001"},
			"ns/cleared": {UID: "uc", ResourceVersion: "10"},
			"ns/plain":   {UID: "up", ResourceVersion: "8"},
		},
		LastResourceVersion: "10",
	}
	assertSnapshot(t, mustLoad(t, f, "configmaps"), want)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = OpenFile(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer f.Close()
	assertSnapshot(t, mustLoad(t, f, "configmaps"), want)
}

// Positions an earlier release wrote, without a View, load as they did,
// with no View, next to positions that have one.
func TestFilePositionsWrittenBeforeViews(t *testing.T) {
	f, path := openTemp(t)
	if err := f.Commit(context.Background(), []Record{withView("configmaps", "ns/new", "un", "9", "3f2a9c1d.0000000000000003")}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	putRaw(t, path, "configmaps", map[string]string{"ns/old": `{"uid":"u2","rv":"7"}`, "ns/intent": intentBytes})
	f = reopen(t, nil, path)
	snap := mustLoad(t, f, "configmaps")
	assertSnapshot(t, snap, Snapshot{
		Objects: map[string]Position{
			"ns/new":    {UID: "un", ResourceVersion: "9", View: "3f2a9c1d.0000000000000003"},
			"ns/old":    {UID: "u2", ResourceVersion: "7"},
			"ns/intent": {UID: "u1"},
		},
		LastResourceVersion: "9",
	})
	if !snap.Objects["ns/intent"].IsIntent() || snap.Objects["ns/new"].IsIntent() {
		t.Errorf("IsIntent: ns/intent %v, ns/new %v; want true, false", snap.Objects["ns/intent"].IsIntent(), snap.Objects["ns/new"].IsIntent())
	}
}

// The Writer hands a record's View to the store, and of two records for
// one object the later one's, View or none.
func TestWriterKeepsView(t *testing.T) {
	f, _ := openTemp(t)
	w := NewWriter(f, 0, nil)
	w.Record(
		withView("pods", "ns/a", "ua", "5", "3f2a9c1d.0000000000000001"),
		withView("pods", "ns/a", "ua", "6", "3f2a9c1d.0000000000000002"),
		withView("pods", "ns/b", "ub", "7", "3f2a9c1d.0000000000000003"),
		put("pods", "ns/b", "ub", "8"),
		withView("pods", "ns/c", "uc", "4", "3f2a9c1d.0000000000000004"),
	)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertSnapshot(t, mustLoad(t, f, "pods"), Snapshot{
		Objects: map[string]Position{
			"ns/a": {UID: "ua", ResourceVersion: "6", View: "3f2a9c1d.0000000000000002"},
			"ns/b": {UID: "ub", ResourceVersion: "8"},
			"ns/c": {UID: "uc", ResourceVersion: "4", View: "3f2a9c1d.0000000000000004"},
		},
		LastResourceVersion: "8",
	})
}
