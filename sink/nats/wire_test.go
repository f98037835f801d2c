package nats

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

var rewriteGolden = flag.Bool("update", false, "rewrite testdata/wire.golden from what the sink sends")

// The messages the sink sends, as a subscriber on the server receives
// them (subject, every header, body), are those of testdata/wire.golden,
// in both content modes, both layouts and core mode: for updates, deletes
// (with the delete TTL in the state layout), cluster-scoped objects,
// views, and a binary-mode event too large for headers, sent structured.
// A change of the sink's code must not change a byte of it.
func TestWireFormat(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	sc := srv.Conn(t)
	sub, err := sc.SubscribeSync("kube.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, tc := range []struct {
		name string
		vars map[string]string
	}{
		{"state", map[string]string{"BRIDGE_NATS_STREAM": "STATE", "BRIDGE_NATS_SUBJECT_PREFIX": "kube.state"}},
		{"history", map[string]string{"BRIDGE_NATS_STREAM": "HISTORY", "BRIDGE_NATS_SUBJECT_PREFIX": "kube.history", "BRIDGE_NATS_LAYOUT": "history"}},
		{"core", map[string]string{"BRIDGE_NATS_MODE": "core", "BRIDGE_NATS_SUBJECT_PREFIX": "kube.core"}},
	} {
		for _, mode := range []CEMode{CEStructured, CEBinary} {
			vars := map[string]string{"BRIDGE_NATS_CE_MODE": string(mode)}
			for k, v := range tc.vars {
				vars[k] = v
			}
			s := newSink(t, serverConfig(t, srv, vars))
			update := message("team-a", 1, 2)
			update.View = "v1:abc"
			update.Reason = "reconciled"
			added := message("team-a", 2, 0)
			added.Snapshot = true
			added.Subject = "team-a/héllo wörld"
			cluster := message("", 3, 1)
			cluster.Subject, cluster.Namespace = "cm-003", ""
			cluster.View = "v1:def"
			omitted := message("team-a", 4, 1)
			omitted.ContentOmitted = true
			gone := deleted(message("team-a", 5, 3))
			left := deleted(message("team-a", 6, 3))
			left.Reason = "left-filter"
			long := message("team-a", 7, 1)
			long.Name = strings.Repeat("n", 70_000)
			long.Subject = "team-a/" + long.Name
			msgs := []*wire.Message{update, added, cluster, omitted, gone, left, long}
			if err := s.Publish(t.Context(), msgs); err != nil {
				t.Fatalf("%s %s: %v", tc.name, mode, err)
			}
			fmt.Fprintf(&out, "## %s %s\n", tc.name, mode)
			for range msgs {
				nm, err := sub.NextMsg(10 * time.Second)
				if err != nil {
					t.Fatalf("%s %s: %v", tc.name, mode, err)
				}
				fmt.Fprintf(&out, "subject %s\n", nm.Subject)
				for _, k := range slices.Sorted(maps.Keys(nm.Header)) {
					for _, v := range nm.Header[k] {
						fmt.Fprintf(&out, "%s: %s\n", k, abbrev(v))
					}
				}
				fmt.Fprintf(&out, "body %s\n\n", abbrev(string(nm.Data)))
			}
		}
	}
	golden := filepath.Join("testdata", "wire.golden")
	if *rewriteGolden {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("the messages sent differ from %s (go test -run TestWireFormat -update rewrites it); sent:\n%s", golden, got)
	}
}

// abbrev is v, or when it is long its start and end, its length and its
// SHA-256, so that the golden file stays readable and still pins every
// byte.
func abbrev(v string) string {
	if len(v) <= 1024 {
		return v
	}
	return fmt.Sprintf("%s...(%d bytes, sha256 %x)...%s", v[:150], len(v), sha256.Sum256([]byte(v)), v[len(v)-150:])
}
