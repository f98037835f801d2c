package nats

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// 10,000 deltas of 100 objects, published by 4 goroutines in batches of
// 500 as the pipeline does, reach the stream all, in order per object. A
// second publish of the same 10,000 is accepted and stores nothing: the
// stream drops every one by its Nats-Msg-Id.
func TestPublishTenThousandThenDeduplicate(t *testing.T) {
	const objects, versions, workers, batch = 100, 100, 4, 500
	srv := natstest.Start(t, natstest.Options{})
	// Every version is kept in the history layout only.
	s := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_LAYOUT": string(LayoutHistory)}))
	nc := srv.Conn(t)

	// Each worker owns a quarter of the objects, as the pipeline keys
	// batches by object; within a worker versions go in order.
	publishAll := func() time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				var msgs []*wire.Message
				for v := range versions {
					for o := w; o < objects; o += workers {
						msgs = append(msgs, message("dedupe", o, v))
					}
				}
				for len(msgs) > 0 {
					n := min(batch, len(msgs))
					if err := s.Publish(t.Context(), msgs[:n]); err != nil {
						t.Errorf("worker %d: Publish: %v", w, err)
						return
					}
					msgs = msgs[n:]
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}

	took := publishAll()
	if t.Failed() {
		t.FailNow()
	}
	st := natstest.StreamState(t, nc, "KUBE")
	t.Logf("first publish of %d messages: %s; stream holds %d messages", objects*versions, took.Round(time.Millisecond), st.Msgs)
	if st.Msgs != objects*versions {
		t.Fatalf("stream holds %d messages, want %d", st.Msgs, objects*versions)
	}

	got := decodeAll(t, streamMsgs(t, nc, "KUBE", "kube.test.core.v1.configmaps.dedupe.>"))
	if len(got) != objects*versions {
		t.Fatalf("consumer read %d messages, want %d", len(got), objects*versions)
	}
	next := map[string]int{} // object -> next version expected
	for i, m := range got {
		rv, _ := strconv.Atoi(m.ResourceVersion)
		if v := rv - 1000; v != next[m.Name] {
			t.Fatalf("message %d: %s at version %d, want version %d: out of order", i, m.Name, v, next[m.Name])
		}
		next[m.Name]++
	}

	took = publishAll()
	if t.Failed() {
		t.FailNow()
	}
	after := natstest.StreamState(t, nc, "KUBE")
	t.Logf("second publish of the same %d messages: %s; stream holds %d messages", objects*versions, took.Round(time.Millisecond), after.Msgs)
	if after.Msgs != st.Msgs || after.LastSeq != st.LastSeq {
		t.Fatalf("after republishing, stream holds %d messages (last seq %d), want %d (last seq %d): duplicates were stored",
			after.Msgs, after.LastSeq, st.Msgs, st.LastSeq)
	}
}

// The stream the bridge creates has file storage, the subjects under the
// prefix, the replicas and duplicate window of the configuration and the
// limits of its layout; a second start with other settings leaves it as
// it is.
func TestCreateStream(t *testing.T) {
	for _, tc := range []struct {
		layout Layout
		check  func(c jetstream.StreamConfig) bool
	}{
		{LayoutState, func(c jetstream.StreamConfig) bool {
			return c.MaxAge == 0 && c.MaxMsgsPerSubject == 1 && c.MaxMsgs == -1 && c.MaxBytes == -1 && c.AllowMsgTTL &&
				c.Metadata[wire.MetadataLayout] == string(LayoutState) && c.Metadata[wire.MetadataDeleteTTL] == "1h30m0s"
		}},
		{LayoutHistory, func(c jetstream.StreamConfig) bool {
			return c.MaxAge == 48*time.Hour && c.MaxMsgsPerSubject == -1 && !c.AllowMsgTTL &&
				c.Metadata[wire.MetadataLayout] == string(LayoutHistory) && c.Metadata[wire.MetadataDeleteTTL] == ""
		}},
	} {
		t.Run(string(tc.layout), func(t *testing.T) {
			srv := natstest.Start(t, natstest.Options{})
			cfg := serverConfig(t, srv, map[string]string{
				"BRIDGE_NATS_LAYOUT":           string(tc.layout),
				"BRIDGE_NATS_STREAM":           "CHANGES",
				"BRIDGE_NATS_SUBJECT_PREFIX":   "acme.k8s",
				"BRIDGE_NATS_STREAM_MAX_AGE":   "48h",
				"BRIDGE_NATS_DUPLICATE_WINDOW": "20m",
				"BRIDGE_NATS_DELETE_TTL":       "90m",
			})
			s := newSink(t, cfg)
			info := streamInfo(t, s, "CHANGES")
			c := info.Config
			if c.Storage.String() != "File" || len(c.Subjects) != 1 || c.Subjects[0] != "acme.k8s.>" || c.Retention != jetstream.LimitsPolicy ||
				c.Duplicates != 20*time.Minute || c.Replicas != 1 || !tc.check(c) {
				t.Fatalf("stream config: %+v", c)
			}

			cfg.DuplicateWindow = 30 * time.Minute
			s2 := newSink(t, cfg)
			if got := streamInfo(t, s2, "CHANGES").Config; !reflect.DeepEqual(got, c) {
				t.Errorf("a start with a new window changed the stream: %+v, was %+v", got, c)
			}
		})
	}
}

// With BRIDGE_NATS_CREATE_STREAM=false, a missing stream, or one that does
// not capture the bridge's subjects, stops the start with a clear error.
func TestExistingStream(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	cfg := serverConfig(t, srv, map[string]string{"BRIDGE_NATS_CREATE_STREAM": "false", "BRIDGE_NATS_STREAM": "MINE"})

	_, err := New(t.Context(), parse(t, cfg), testLogger(t))
	if err == nil || !containsAll(err.Error(), "stream MINE does not exist", "BRIDGE_NATS_CREATE_STREAM=false", "kube.>") {
		t.Fatalf("missing stream: err = %v", err)
	}

	js := srv.JetStream(t)
	if _, err := js.CreateStream(t.Context(), streamConfigFor("MINE", "other.>")); err != nil {
		t.Fatal(err)
	}
	_, err = New(t.Context(), parse(t, cfg), testLogger(t))
	if err == nil || !containsAll(err.Error(), "stream MINE captures other.>", "kube.x.x.x.x.x") {
		t.Fatalf("stream with other subjects: err = %v", err)
	}

	if _, err := js.UpdateStream(t.Context(), streamConfigFor("MINE", "kube.*.core.>")); err != nil {
		t.Fatal(err)
	}
	cfg.Subject = "{prefix}.{cluster}.core.{group}.{resource}.{namespace}.{name}"
	s := newSink(t, cfg)
	if err := s.Publish(t.Context(), []*wire.Message{message("ns", 1, 0)}); err != nil {
		t.Fatalf("Publish to a stream made by someone else: %v", err)
	}
}

// Core NATS delivers to connected subscribers, and the Publish returns
// once the server has the batch.
func TestCoreMode(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	s := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_MODE": "core", "BRIDGE_NATS_CE_MODE": "binary"}))
	sc := srv.Conn(t)
	sub, err := sc.SubscribeSync("kube.test.core.v1.configmaps.core.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	var msgs []*wire.Message
	for v := range 3 {
		for o := range 3 {
			msgs = append(msgs, message("core", o, v))
		}
	}
	if err := s.Publish(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	for i, want := range msgs {
		nm, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got, err := decode(nm)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || nm.Subject != "kube.test.core.v1.configmaps.core."+want.Name {
			t.Errorf("message %d: %s on %s, want %s", i, got.ID, nm.Subject, want.ID)
		}
	}
	if s.js != nil {
		t.Error("core mode uses JetStream")
	}
}

// A message larger than the server or the stream takes fails alone, too
// large and terminal; the rest of the batch is published, but for the
// later changes of its object, which wait for its replacement.
func TestTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  natstest.Options
		limit func(t *testing.T, srv *natstest.Server)
	}{
		{name: "server max payload", opts: natstest.Options{MaxPayload: 4096}},
		{name: "stream max message size", limit: func(t *testing.T, srv *natstest.Server) {
			c := streamConfigFor("KUBE", "kube.>")
			c.MaxMsgSize = 4096
			if _, err := srv.JetStream(t).CreateStream(t.Context(), c); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, tc.opts)
			vars := map[string]string{}
			if tc.limit != nil {
				tc.limit(t, srv)
				vars["BRIDGE_NATS_CREATE_STREAM"] = "false"
			}
			s := newSink(t, serverConfig(t, srv, vars))
			big := message("big", 1, 0)
			big.Data = []byte(fmt.Sprintf(`{"object":{"pad":%q}}`, make([]byte, 8192)))
			// The later change of the large message's object waits for the
			// replacement the bridge sends.
			later := message("big", 1, 1)
			msgs := []*wire.Message{message("big", 0, 0), big, message("big", 2, 0), later}
			errs := sink.PerMessage(s.Publish(t.Context(), msgs), len(msgs))
			if errs[0] != nil || errs[2] != nil {
				t.Errorf("small messages failed: %v, %v", errs[0], errs[2])
			}
			if !sink.IsTerminal(errs[1]) || !sink.IsTooLarge(errs[1]) {
				t.Errorf("large message: %v, want it too large, terminally", errs[1])
			}
			if !errors.Is(errs[3], sink.ErrEarlierFailed) || sink.IsTerminal(errs[3]) {
				t.Errorf("later change of the large message's object: %v, want it held back, to retry", errs[3])
			}
			if n := natstest.StreamState(t, srv.Conn(t), "KUBE").Msgs; n != 2 {
				t.Errorf("stream holds %d messages, want 2", n)
			}
		})
	}
}

// While the server is down, Publish fails with a retryable error and
// Health reports it; once the server is back, both recover without a new
// sink, and nothing published before is lost.
func TestServerRestart(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	s := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_RECONNECT_MAX_WAIT": "200ms", "BRIDGE_NATS_LAYOUT": string(LayoutHistory)}))
	if err := s.Health(); err != nil {
		t.Fatalf("Health while connected: %v", err)
	}
	if err := s.Publish(t.Context(), []*wire.Message{message("restart", 0, 0)}); err != nil {
		t.Fatal(err)
	}

	srv.Shutdown()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		err := s.Health()
		return err != nil, "Health still nil with the server down"
	})
	err := s.Publish(t.Context(), []*wire.Message{message("restart", 0, 1)})
	if err == nil || sink.IsTerminal(err) {
		t.Fatalf("Publish with the server down: %v, want a retryable error", err)
	}

	start := time.Now()
	srv.Start()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		err := s.Health()
		return err == nil, fmt.Sprintf("Health: %v", err)
	})
	t.Logf("reconnected %s after the server was back", time.Since(start).Round(time.Millisecond))
	poll.Until(t, 30*time.Second, func() (bool, string) {
		err := s.Publish(t.Context(), []*wire.Message{message("restart", 0, 1), message("restart", 0, 2)})
		return err == nil, fmt.Sprintf("Publish: %v", err)
	})
	got := decodeAll(t, streamMsgs(t, srv.Conn(t), "KUBE", "kube.>"))
	if len(got) != 3 {
		t.Fatalf("stream holds %d messages, want 3", len(got))
	}
	for i, m := range got {
		if want := strconv.Itoa(1000 + i); m.ResourceVersion != want {
			t.Errorf("message %d at %s, want %s", i, m.ResourceVersion, want)
		}
	}
}

// No server at the address: New fails at once, naming it.
func TestConnectRefused(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	cfg := serverConfig(t, srv, nil)
	srv.Shutdown()
	_, err := New(t.Context(), parse(t, cfg), testLogger(t))
	if err == nil || !containsAll(err.Error(), "nats sink: connect to "+srv.URL()) {
		t.Fatalf("err = %v", err)
	}
}
