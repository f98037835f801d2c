package natskv

import (
	"strings"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/natstest"
)

// An object key whose token an earlier release wrote whole, past
// maxKeyToken (257 bytes up to what the server's control line took), is
// loaded; once the object is updated and then deleted, it is gone from the
// bucket, so that the next start does not find it again and publish its
// delete once more. Also when this release had already written the bounded
// key next to the whole one.
func TestOldFormLongKeys(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	const resource = "roles.rbac.authorization.k8s.io"
	for _, tc := range []struct {
		name    string
		key     string
		bounded bool // the bounded key is there too, written since
	}{
		{name: "just past the bound", key: "ns/" + strings.Repeat("b", maxKeyToken-2)},
		{name: "near the control line", key: "ns/" + strings.Repeat("c", 3800)},
		{name: "with its bounded key", key: "ns/" + strings.Repeat("d", 1000), bounded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := strings.ReplaceAll(tc.name, " ", "-")
			s := open(t, nc, bucket)
			old := escapeKey(resource) + "." + objectsToken + "." + escapeWhole(tc.key)
			if _, err := s.kv.Put(t.Context(), old, []byte(`{"uid":"u","rv":"1"}`)); err != nil {
				t.Fatalf("put the earlier form: %v", err)
			}
			if tc.bounded {
				if err := s.Commit(t.Context(), []checkpoint.Record{rec(resource, tc.key, "u", "2")}); err != nil {
					t.Fatal(err)
				}
			}
			s = open(t, nc, bucket)
			want := "1"
			if tc.bounded {
				want = "2"
			}
			if p := load(t, s, resource).Objects[tc.key]; p.UID != "u" || p.ResourceVersion != want {
				t.Fatalf("loaded %+v, want rv %s", p, want)
			}
			if err := s.Commit(t.Context(), []checkpoint.Record{rec(resource, tc.key, "u", "3")}); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(t.Context(), []checkpoint.Record{del(resource, tc.key, "u", "4")}); err != nil {
				t.Fatal(err)
			}
			if p, ok := load(t, open(t, nc, bucket), resource).Objects[tc.key]; ok {
				t.Fatalf("deleted object still in the checkpoint at %+v", p)
			}
			if r := nc.Stats().Reconnects; r != 0 || !nc.IsConnected() {
				t.Errorf("connection: %d reconnects, connected %v", r, nc.IsConnected())
			}
		})
	}
}
