package checkpoint

import (
	"context"
	"strings"
	"testing"
)

// An object key past maxFileKey written by an earlier release, whole, is
// loaded; once the object is updated and then deleted, it is gone from the
// file, so that the next start does not find it again and publish its
// delete once more. Also when this release had already written the bounded
// key next to the whole one.
func TestFileOldFormLongKeys(t *testing.T) {
	const resource = "clusterroles.rbac.authorization.k8s.io"
	for _, tc := range []struct {
		name    string
		key     string
		bounded bool // the bounded key is there too, written since
	}{
		{name: "just past the bound", key: strings.Repeat("b", maxFileKey+1)},
		{name: "bbolt's limit", key: strings.Repeat("c", 32768)},
		{name: "with its bounded key", key: "ns/" + strings.Repeat("d", 2000), bounded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/checkpoint.db"
			f := reopen(t, nil, path)
			if err := f.Commit(context.Background(), []Record{put(resource, "admin", "ua", "1")}); err != nil {
				t.Fatal(err)
			}
			if tc.bounded {
				if err := f.Commit(context.Background(), []Record{put(resource, tc.key, "u", "2")}); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			putOldForm(t, path, resource, tc.key, Position{UID: "u", ResourceVersion: "1"})

			f = reopen(t, nil, path)
			want := map[string]Position{"admin": {UID: "ua", ResourceVersion: "1"}, tc.key: {UID: "u", ResourceVersion: "1"}}
			if tc.bounded {
				want[tc.key] = Position{UID: "u", ResourceVersion: "2"}
			}
			if got := mustLoad(t, f, resource); !sameSnapshot(got, Snapshot{LastResourceVersion: got.LastResourceVersion, Objects: want}) {
				t.Fatalf("loaded %v, want %v", got.Objects[tc.key], want[tc.key])
			}
			if err := f.Commit(context.Background(), []Record{put(resource, tc.key, "u", "3")}); err != nil {
				t.Fatal(err)
			}
			if err := f.Commit(context.Background(), []Record{del(resource, tc.key, "u", "4")}); err != nil {
				t.Fatal(err)
			}
			f = reopen(t, f, path)
			if p, ok := mustLoad(t, f, resource).Objects[tc.key]; ok {
				t.Fatalf("deleted object still in the checkpoint at %+v", p)
			}
		})
	}
}
