package natskv

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/natstest"
)

// A token past maxKeyToken is bounded: never longer, the same every time,
// a valid key, never the token of a short value, and different for values
// that differ only past the cut.
func TestEscapeKeyBounded(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	keep := maxKeyToken - len(hashMarker) - 32
	for _, tc := range []struct {
		name, in string
		hashed   bool
		kept     string
	}{
		{name: "at the bound", in: a(maxKeyToken)},
		{name: "escaped form at the bound", in: a(maxKeyToken-3) + "_"},
		{name: "just past the bound", in: a(maxKeyToken + 1), hashed: true, kept: a(keep)},
		{name: "escaped form just past the bound", in: a(maxKeyToken-2) + "_", hashed: true, kept: a(keep)},
		{name: "cut before an escape it would split", in: a(keep-1) + strings.Repeat(":", 40), hashed: true, kept: a(keep - 1)},
		{name: "namespaced key of the longest name", in: "team-a/" + a(524216), hashed: true, kept: "team-a/" + a(keep-7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := escapeKey(tc.in)
			if len(tok) > maxKeyToken || !validKey.MatchString(objectKey("clusterroles.rbac.authorization.k8s.io", tc.in)) {
				t.Fatalf("escapeKey of %d bytes = %d bytes %.300q: not a key token within %d", len(tc.in), len(tok), tok, maxKeyToken)
			}
			if escapeKey(tc.in) != tok {
				t.Fatal("escapeKey is not deterministic")
			}
			back, err := unescapeKey(tok)
			if !tc.hashed {
				if err != nil || back != tc.in {
					t.Fatalf("unescapeKey(%q) = %q, %v", tok, back, err)
				}
				return
			}
			if !errors.Is(err, errHashedKey) {
				t.Fatalf("unescapeKey of a bounded token = %q, %v; want errHashedKey", back, err)
			}
			if kept, _, _ := strings.Cut(tok, hashMarker); kept != tc.kept {
				t.Errorf("bounded token keeps %q, want %q", kept, tc.kept)
			}
			if escapeKey(tc.in+"b") == tok {
				t.Error("a longer value has the same token")
			}
			if escapeKey(tok) == tok {
				t.Error("the short value spelled like the bounded token has it as its own")
			}
		})
	}
}

// Objects with names past the server's 4 KiB control line, up to the
// longest the API server takes, are committed among others, loaded back
// with their whole keys by a new store, and deleted, without the shared
// connection ever dropping.
func TestLongKeys(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "long")
	const resource = "clusterroles.rbac.authorization.k8s.io"
	keys := []string{"admin", strings.Repeat("r", 4097), strings.Repeat("s", 100_000), strings.Repeat("t", 524_216), "view"}
	var recs []checkpoint.Record
	for i, k := range keys {
		recs = append(recs, rec(resource, k, "u"+k[:1], strings.Repeat("1", i+1)))
	}
	if err := s.Commit(t.Context(), recs); err != nil {
		t.Fatalf("Commit: %.500v", err)
	}
	snap := load(t, open(t, nc, "long"), resource)
	if len(snap.Objects) != len(keys) || snap.LastResourceVersion != "11111" {
		t.Errorf("loaded %d objects, last %s; want %d, 11111", len(snap.Objects), snap.LastResourceVersion, len(keys))
	}
	for i, k := range keys {
		if p := snap.Objects[k]; p.UID != "u"+k[:1] || p.ResourceVersion != strings.Repeat("1", i+1) {
			t.Errorf("key of %d bytes: %+v", len(k), p)
		}
	}
	if err := s.Commit(t.Context(), []checkpoint.Record{del(resource, keys[3], "ut", "111111")}); err != nil {
		t.Fatalf("Commit a delete: %.500v", err)
	}
	snap = load(t, open(t, nc, "long"), resource)
	if _, ok := snap.Objects[keys[3]]; ok || len(snap.Objects) != len(keys)-1 {
		t.Errorf("after deleting the longest: %d objects, longest still there: %v", len(snap.Objects), ok)
	}
	if r := nc.Stats().Reconnects; r != 0 || !nc.IsConnected() {
		t.Errorf("connection: %d reconnects, connected %v", r, nc.IsConnected())
	}
}

// A bounded key whose value does not hold the object's key cannot be
// loaded: the error names the key.
func TestLoadBoundedKeyWithoutKey(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "nokey")
	key := objectKey("roles.rbac.authorization.k8s.io", "ns/"+strings.Repeat("x", 300))
	if _, err := s.kv.Put(t.Context(), key, []byte(`{"uid":"u","rv":"1"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(t.Context(), "roles.rbac.authorization.k8s.io")
	if err == nil || !strings.Contains(err.Error(), "holds no object key of that key") {
		t.Fatalf("Load = %v, want an error saying the value holds no object key", err)
	}
}

// A record whose value is larger than the server takes (the position of an
// object whose name alone passes max_payload) can never be stored: Commit
// drops it, logs it, and stores the rest, instead of failing every flush
// from then on.
func TestRecordPastMaxPayload(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{MaxPayload: 64 << 10})
	nc := srv.Conn(t)
	var dropped []string // only Commit calls it, and Commits are serialised
	s, err := Open(t.Context(), nc, "payload", Options{Create: true, Dropped: func(resource string) { dropped = append(dropped, resource) }}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const resource = "roles.rbac.authorization.k8s.io"
	huge := "team-a/" + strings.Repeat("h", 100_000)
	if err := s.Commit(t.Context(), []checkpoint.Record{
		rec(resource, "team-a/before", "ua", "1"), rec(resource, huge, "uh", "2"), rec(resource, "team-a/after", "ub", "3"),
	}); err != nil {
		t.Fatalf("Commit: %.500v", err)
	}
	if !slices.Equal(dropped, []string{resource}) {
		t.Errorf("dropped records reported: %q, want the one of %s", dropped, resource)
	}
	snap := load(t, open(t, nc, "payload"), resource)
	if _, ok := snap.Objects[huge]; ok || len(snap.Objects) != 2 || snap.LastResourceVersion != "3" {
		t.Errorf("loaded %d objects (the huge one: %v), last %s; want the 2 others, 3", len(snap.Objects), ok, snap.LastResourceVersion)
	}
	if err := s.Commit(t.Context(), []checkpoint.Record{del(resource, huge, "uh", "4")}); err != nil {
		t.Fatalf("Commit its delete: %.500v", err)
	}
	if r := nc.Stats().Reconnects; r != 0 || !nc.IsConnected() {
		t.Errorf("connection: %d reconnects, connected %v", r, nc.IsConnected())
	}
}
