package natskv

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func open(t testing.TB, nc *nats.Conn, bucket string) *Store {
	t.Helper()
	s, err := Open(t.Context(), nc, bucket, Options{Create: true}, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func load(t testing.TB, s *Store, resource string) checkpoint.Snapshot {
	t.Helper()
	snap, err := s.Load(t.Context(), resource)
	if err != nil {
		t.Fatalf("Load %s: %v", resource, err)
	}
	return snap
}

func rec(resource, key, uid, rv string) checkpoint.Record {
	return checkpoint.Record{Resource: resource, Key: key, Position: checkpoint.Position{UID: uid, ResourceVersion: rv}}
}

func del(resource, key, uid, rv string) checkpoint.Record {
	r := rec(resource, key, uid, rv)
	r.Deleted = true
	return r
}

func TestCommitAndLoad(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "ckpt")

	if snap := load(t, s, "configmaps"); len(snap.Objects) != 0 || snap.Objects == nil || snap.LastResourceVersion != "" {
		t.Fatalf("empty bucket: %+v", snap)
	}
	keys := []string{
		"team-a/web", "kube-system/coredns.v1", "ip-10-0-1-5.ec2.internal", "ns/a_b=c", "ns/é*>", "x",
	}
	var recs []checkpoint.Record
	for i, k := range keys {
		recs = append(recs, rec("configmaps", k, "uid-"+k, strconv.Itoa(100+i)))
	}
	recs = append(recs,
		rec("deployments.apps", "team-a/web", "d1", "90"),
		rec("configmaps", "team-a/web", "uid-team-a/web", "120"), // later record for the same key wins
		del("configmaps", "x", "uid-x", "121"),                   // deleted: gone, but its rv counts
	)
	if err := s.Commit(t.Context(), recs); err != nil {
		t.Fatal(err)
	}

	// A second store on the bucket, as after a restart, sees the same.
	for name, st := range map[string]*Store{"same store": s, "new store": open(t, nc, "ckpt")} {
		t.Run(name, func(t *testing.T) {
			want := map[string]checkpoint.Position{}
			for i, k := range keys[:len(keys)-1] {
				want[k] = checkpoint.Position{UID: "uid-" + k, ResourceVersion: strconv.Itoa(100 + i)}
			}
			want["team-a/web"] = checkpoint.Position{UID: "uid-team-a/web", ResourceVersion: "120"}
			snap := load(t, st, "configmaps")
			if !maps.Equal(snap.Objects, want) || snap.LastResourceVersion != "121" {
				t.Errorf("configmaps: %+v (last %s), want %+v (last 121)", snap.Objects, snap.LastResourceVersion, want)
			}
			snap = load(t, st, "deployments.apps")
			if len(snap.Objects) != 1 || snap.Objects["team-a/web"].UID != "d1" || snap.LastResourceVersion != "90" {
				t.Errorf("deployments.apps: %+v", snap)
			}
			if snap := load(t, st, "deployments"); len(snap.Objects) != 0 {
				t.Errorf("deployments (core) sees the keys of deployments.apps: %+v", snap)
			}
		})
	}
}

// LastResourceVersion never moves back: resourceVersions compare as
// integers when both parse, even across stores; otherwise the newer wins.
func TestLastResourceVersion(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	for _, tc := range []struct {
		name    string
		commits [][]string // resourceVersions, one Commit each
		want    string
	}{
		{"higher wins", [][]string{{"9", "10", "8"}}, "10"},
		{"across commits", [][]string{{"100"}, {"99"}}, "100"},
		{"integers, not strings", [][]string{{"9"}, {"10"}}, "10"},
		{"opaque takes the newer", [][]string{{"100"}, {"abc"}}, "abc"},
		{"empty keeps", [][]string{{"5"}, {""}}, "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource := strings.ReplaceAll(tc.name, " ", "-")
			for i, rvs := range tc.commits {
				// Each commit from a fresh store: the stored value counts,
				// not only what one store remembers.
				s := open(t, nc, "lrv")
				var recs []checkpoint.Record
				for j, rv := range rvs {
					recs = append(recs, rec(resource, fmt.Sprintf("k%d-%d", i, j), "u", rv))
				}
				if err := s.Commit(t.Context(), recs); err != nil {
					t.Fatal(err)
				}
			}
			if got := load(t, open(t, nc, "lrv"), resource).LastResourceVersion; got != tc.want {
				t.Errorf("LastResourceVersion = %q, want %q", got, tc.want)
			}
		})
	}
	if got := checkpoint.LaterResourceVersion("", "7"); got != "7" {
		t.Errorf("laterResourceVersion from nothing = %q", got)
	}
}

func TestOpen(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)

	_, err := Open(t.Context(), nc, "absent", Options{}, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "bucket absent does not exist") || !strings.Contains(err.Error(), "BRIDGE_NATS_CREATE_STREAM=false") {
		t.Fatalf("missing bucket with create=false: %v", err)
	}
	if _, err := Open(t.Context(), nc, "a.b", Options{Create: true}, testLogger(t)); err == nil || !strings.Contains(err.Error(), `"a.b" is not a bucket name`) {
		t.Fatalf("bad name: %v", err)
	}

	s := open(t, nc, "made")
	st := natstest.Stream(t, nc, "KV_made")
	cfg := st.CachedInfo().Config
	if cfg.MaxMsgsPerSubject != 1 || cfg.Storage != jetstream.FileStorage || !cfg.AllowMsgTTL || s.markerTTL != markerTTL {
		t.Errorf("created bucket: history %d storage %s allowMsgTTL %v markerTTL %s", cfg.MaxMsgsPerSubject, cfg.Storage, cfg.AllowMsgTTL, s.markerTTL)
	}

	// A bucket made by an operator, without per-message TTLs, is used as
	// it is, with create=false too.
	if _, err := natstest.JetStreamOn(t, nc).CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "theirs"}); err != nil {
		t.Fatal(err)
	}
	theirs, err := Open(t.Context(), nc, "theirs", Options{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	if theirs.markerTTL != 0 {
		t.Errorf("markerTTL %s on a bucket without per-message TTLs", theirs.markerTTL)
	}
	if err := theirs.Commit(t.Context(), []checkpoint.Record{rec("pods", "a/b", "u", "1"), del("pods", "a/b", "u", "2")}); err != nil {
		t.Fatalf("Commit to a bucket without TTLs: %v", err)
	}
}

// A deleted object leaves one marker, which carries a TTL so that it
// expires; its earlier value is gone.
func TestDeleteLeavesExpiringMarker(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "marks")
	if err := s.Commit(t.Context(), []checkpoint.Record{rec("pods", "ns/p", "u", "1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), []checkpoint.Record{del("pods", "ns/p", "u", "2")}); err != nil {
		t.Fatal(err)
	}
	st := natstest.Stream(t, nc, "KV_marks")
	m, err := st.GetLastMsgForSubject(t.Context(), "$KV.marks."+objectKey("pods", "ns/p"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(kvOperationHeader) != kvPurge || m.Header.Get(jetstream.MsgTTLHeader) == "" || len(m.Data) != 0 {
		t.Errorf("marker: headers %v, data %q", m.Header, m.Data)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The marker, and the resource's last resourceVersion.
	if info.State.Msgs != 2 {
		t.Errorf("bucket holds %d messages, want 2", info.State.Msgs)
	}
}

// A flush of 20,000 records is published in one go and loaded back with
// one watch: the client sends a handful of messages to load, not one per
// key.
func TestLargeCommitAndLoad(t *testing.T) {
	const n = 20000
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "big")
	recs := make([]checkpoint.Record, n)
	for i := range recs {
		recs[i] = rec("pods", fmt.Sprintf("ns-%d/pod-%05d", i%10, i), fmt.Sprintf("uid-%d", i), strconv.Itoa(i+1))
	}
	start := time.Now()
	if err := s.Commit(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	t.Logf("commit of %d records: %s", n, time.Since(start).Round(time.Millisecond))

	fresh := open(t, nc, "big")
	before := nc.Stats().OutMsgs
	start = time.Now()
	snap := load(t, fresh, "pods")
	sent := nc.Stats().OutMsgs - before
	t.Logf("load of %d keys: %s, %d messages sent", n, time.Since(start).Round(time.Millisecond), sent)
	if len(snap.Objects) != n || snap.LastResourceVersion != strconv.Itoa(n) {
		t.Fatalf("loaded %d objects, last %s; want %d, last %d", len(snap.Objects), snap.LastResourceVersion, n, n)
	}
	if sent > 50 {
		t.Errorf("Load sent %d messages for %d keys: a round trip per key?", sent, n)
	}
}

// Close leaves the connection open; a closed store refuses Commit.
func TestCloseKeepsConnection(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "close")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !nc.IsConnected() {
		t.Fatal("Close closed the connection")
	}
	if err := s.Commit(t.Context(), []checkpoint.Record{rec("pods", "a/b", "u", "1")}); err == nil {
		t.Fatal("Commit after Close succeeded")
	}
}

// With the server down, Commit fails and applies nothing new; after the
// server is back the same store commits again, and what was committed
// before the outage is still there.
func TestCommitAcrossServerRestart(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	s := open(t, nc, "restart")
	if err := s.Commit(t.Context(), []checkpoint.Record{rec("pods", "a/one", "u1", "1")}); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	err := s.Commit(ctx, []checkpoint.Record{rec("pods", "a/two", "u2", "2")})
	cancel()
	if err == nil {
		t.Fatal("Commit with the server down succeeded")
	}
	srv.Start()
	var snap checkpoint.Snapshot
	poll.UntilNil(t, 30*time.Second, func() error {
		if err := s.Commit(t.Context(), []checkpoint.Record{rec("pods", "a/two", "u2", "2")}); err != nil {
			return fmt.Errorf("commit after the server came back: %w", err)
		}
		return nil
	})
	snap = load(t, s, "pods")
	if len(snap.Objects) != 2 || snap.LastResourceVersion != "2" {
		t.Errorf("after restart: %+v", snap)
	}
}

// The checkpoint writer commits through the store concurrently with
// loads.
func TestWithWriter(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	s := open(t, srv.Conn(t), "writer")
	w := checkpoint.NewWriter(s, time.Hour, testLogger(t))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				w.Record(rec("secrets", fmt.Sprintf("ns/s-%d-%d", g, i), "u", strconv.Itoa(g*1000+i)))
				if i%10 == 0 {
					if err := w.Flush(t.Context()); err != nil {
						t.Error(err)
					}
					if _, err := s.Load(t.Context(), "secrets"); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	snap := load(t, s, "secrets")
	if len(snap.Objects) != 200 || snap.LastResourceVersion != "3049" {
		t.Errorf("%d objects, last %s; want 200, last 3049", len(snap.Objects), snap.LastResourceVersion)
	}
}

// A value in the bucket that is not a position fails Load with an error
// that names its key, whatever else the bucket holds.
func TestLoadMalformedValue(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i, value := range []string{`{not json`, `null`, `{"rv":"5"}`, `{}`, ``} {
		t.Run(fmt.Sprintf("%q", value), func(t *testing.T) {
			bucket := fmt.Sprintf("bad%d", i)
			s := open(t, nc, bucket)
			if err := s.Commit(t.Context(), []checkpoint.Record{rec("configmaps", "ns/good", "u", "1")}); err != nil {
				t.Fatal(err)
			}
			kv, err := js.KeyValue(t.Context(), bucket)
			if err != nil {
				t.Fatal(err)
			}
			key := objectKey("configmaps", "ns/bad")
			if _, err := kv.Put(t.Context(), key, []byte(value)); err != nil {
				t.Fatal(err)
			}
			_, err = s.Load(t.Context(), "configmaps")
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Fatalf("Load: %v; want an error naming %s", err, key)
			}
			t.Log(err)
		})
	}
}
