package nats

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// A stream the bridge made in one layout stops a start in the other
// layout with an error naming BRIDGE_NATS_LAYOUT and what differs, and is
// left exactly as it was, messages included. So does the stream of an
// earlier bridge, which knew only the history layout and wrote no
// metadata.
func TestExistingStreamOfOtherLayout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		had, now Layout
		earlier  bool // the stream is an earlier bridge's
		want     []string
	}{
		{"earlier bridge's stream, state layout", LayoutHistory, LayoutState, true, []string{
			"stream KUBE does not fit BRIDGE_NATS_LAYOUT=state", "never changes an existing stream",
			"it keeps unlimited messages per subject, the state layout 1", "set BRIDGE_NATS_LAYOUT=history",
			"its max age is 168h0m0s", "does not allow per-message TTLs", "BRIDGE_NATS_DELETE_TTL",
		}},
		{"history stream, state layout", LayoutHistory, LayoutState, false, []string{
			"stream KUBE does not fit BRIDGE_NATS_LAYOUT=state", "never changes an existing stream",
			`metadata kubebus.io/layout is "history"`,
			"it keeps unlimited messages per subject, the state layout 1", "set BRIDGE_NATS_LAYOUT=history",
			"its max age is 168h0m0s", "does not allow per-message TTLs", "BRIDGE_NATS_DELETE_TTL",
		}},
		{"state stream, history layout", LayoutState, LayoutHistory, false, []string{
			"stream KUBE does not fit BRIDGE_NATS_LAYOUT=history", "never changes an existing stream",
			`metadata kubebus.io/layout is "state"`,
			"it keeps one message per subject", "set BRIDGE_NATS_LAYOUT=state",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, natstest.Options{})
			if tc.earlier {
				// What earlier bridges created.
				c := jetstream.StreamConfig{Name: "KUBE", Subjects: []string{"kube.>"}, Storage: jetstream.FileStorage,
					MaxAge: 168 * time.Hour, Duplicates: 10 * time.Minute}
				if _, err := srv.JetStream(t).CreateStream(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			}
			first := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_LAYOUT": string(tc.had)}))
			msgs := []*wire.Message{message("ns", 0, 0), message("ns", 0, 1), message("ns", 1, 0)}
			if err := first.Publish(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
			before := streamInfo(t, first, "KUBE")

			_, err := New(t.Context(), parse(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_LAYOUT": string(tc.now)})), testLogger(t))
			if err == nil || !containsAll(err.Error(), tc.want...) {
				t.Fatalf("start in the other layout: %v\nwant it to say %q", err, tc.want)
			}
			t.Logf("start in the other layout: %v", err)
			after := streamInfo(t, first, "KUBE")
			if !reflect.DeepEqual(after.Config, before.Config) || after.State.Msgs != before.State.Msgs || after.State.LastSeq != before.State.LastSeq {
				t.Errorf("the stream changed: %+v %+v, was %+v %+v", after.Config, after.State, before.Config, before.State)
			}

			// The layout it was made for still works.
			again := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_LAYOUT": string(tc.had)}))
			if err := again.Publish(t.Context(), []*wire.Message{message("ns", 1, 1)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A stream made by hand for the state layout must have each limit the
// layout needs; each one that differs is named.
func TestExistingStateStreamLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *jetstream.StreamConfig)
		want   string // "": fits
	}{
		{"fits", func(c *jetstream.StreamConfig) {}, ""},
		{"delete TTL metadata shorter than the bridge's", func(c *jetstream.StreamConfig) { c.Metadata[wire.MetadataDeleteTTL] = "1h" }, ""},
		{"delete markers", func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = time.Minute }, ""},
		{"max age", func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "its max age is 1h0m0s"},
		{"several messages per subject", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 }, "it keeps 5 messages per subject"},
		{"no message TTLs", func(c *jetstream.StreamConfig) { c.AllowMsgTTL = false }, "does not allow per-message TTLs"},
		{"max messages", func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 }, "it keeps at most 1000 messages"},
		{"max bytes", func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 }, "it keeps at most 1048576 bytes"},
		{"interest retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, "its retention is Interest"},
		{"discard new per subject", func(c *jetstream.StreamConfig) {
			c.Discard, c.DiscardNewPerSubject = jetstream.DiscardNew, true
		}, "discards new messages per subject"},
		{"no delete TTL metadata", func(c *jetstream.StreamConfig) { delete(c.Metadata, wire.MetadataDeleteTTL) }, "has no metadata kubebus.io/delete-ttl"},
		{"delete TTL metadata longer than the bridge's", func(c *jetstream.StreamConfig) { c.Metadata[wire.MetadataDeleteTTL] = "48h" },
			"kubebus.io/delete-ttl=48h promises consumers that deletes stay longer than BRIDGE_NATS_DELETE_TTL=24h0m0s"},
		{"bad delete TTL metadata", func(c *jetstream.StreamConfig) { c.Metadata[wire.MetadataDeleteTTL] = "a day" }, `kubebus.io/delete-ttl="a day" is not a duration`},
		{"history layout metadata", func(c *jetstream.StreamConfig) { c.Metadata[wire.MetadataLayout] = string(LayoutHistory) }, `metadata kubebus.io/layout is "history"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, natstest.Options{})
			c := streamConfigFor("KUBE", "kube.>")
			tc.change(&c)
			if _, err := srv.JetStream(t).CreateStream(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			s, err := New(t.Context(), parse(t, serverConfig(t, srv, nil)), testLogger(t))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				s.Close(context.Background())
				return
			}
			if err == nil || !containsAll(err.Error(), "does not fit BRIDGE_NATS_LAYOUT=state", tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// In the state layout each subject keeps its object's latest message; a
// delete carries the delete TTL and expires after it, while live objects'
// messages stay, however old.
func TestDeletesExpire(t *testing.T) {
	for _, mode := range []CEMode{CEStructured, CEBinary} {
		t.Run(string(mode), func(t *testing.T) {
			srv := natstest.Start(t, natstest.Options{})
			s := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_DELETE_TTL": "1s", "BRIDGE_NATS_CE_MODE": string(mode)}))
			var msgs []*wire.Message
			for o := range 4 {
				msgs = append(msgs, message("ttl", o, 0), message("ttl", o, 1))
			}
			if err := s.Publish(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
			gone := []*wire.Message{deleted(message("ttl", 1, 2)), deleted(message("ttl", 3, 2))}
			if err := s.Publish(t.Context(), gone); err != nil {
				t.Fatal(err)
			}
			st, err := s.js.Stream(t.Context(), "KUBE")
			if err != nil {
				t.Fatal(err)
			}
			subject := func(o int) string { return "kube.test.core.configmaps.ttl." + message("ttl", o, 0).Name }
			// Before the TTL: one message per object, the latest, the
			// deletes with their TTL.
			for o, want := range []string{"updated", "deleted", "updated", "deleted"} {
				m, err := st.GetLastMsgForSubject(t.Context(), subject(o))
				if err != nil {
					t.Fatalf("object %d: %v", o, err)
				}
				ttl := m.Header.Get(jetstream.MsgTTLHeader)
				if got := m.Header.Get("ce-" + "type"); mode == CEBinary && got != "io.kubebus.object."+want {
					t.Errorf("object %d: latest message is %s, want %s", o, got, want)
				}
				if (want == "deleted") != (ttl == "1s") {
					t.Errorf("object %d, %s: %s = %q", o, want, jetstream.MsgTTLHeader, ttl)
				}
			}
			if n := natstest.StreamState(t, srv.Conn(t), "KUBE").Msgs; n != 4 {
				t.Errorf("stream holds %d messages, want 4 (one per object)", n)
			}
			start := time.Now()
			poll.Until(t, 30*time.Second, func() (bool, string) {
				n := natstest.StreamState(t, srv.Conn(t), "KUBE").Msgs
				return n == 2, "stream still holds the deletes"
			})
			t.Logf("deletes gone %s after publishing", time.Since(start).Round(time.Millisecond))
			for o := range 4 {
				_, err := st.GetLastMsgForSubject(t.Context(), subject(o))
				if gone := o%2 == 1; gone != errors.Is(err, jetstream.ErrMsgNotFound) {
					t.Errorf("object %d: %v", o, err)
				}
			}
		})
	}
}

// deleted makes m a delete.
func deleted(m *wire.Message) *wire.Message {
	m.Action, m.Type = "deleted", "io.kubebus.object.deleted"
	return m
}
