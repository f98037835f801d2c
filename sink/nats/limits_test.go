package nats

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

var clusterroles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}

// clusterRole is a ClusterRole's added event, with a name of n bytes.
func clusterRole(i, n int) *wire.Message {
	name := fmt.Sprintf("role-%d-", i)
	name += strings.Repeat("x", max(0, n-len(name)))
	return &wire.Message{
		ID:              fmt.Sprintf("cr-%d-%d", i, n),
		Source:          "/clusters/test/apis/rbac.authorization.k8s.io/v1/clusterroles",
		Type:            "io.kubebus.object.added",
		Subject:         name,
		Time:            time.Date(2026, 11, 21, 5, 12, 31, 0, time.UTC),
		Action:          "added",
		Resource:        clusterroles,
		ResourceVersion: "10",
		UID:             fmt.Sprintf("uid-cr-%d", i),
		Kind:            "ClusterRole",
		APIVersion:      "rbac.authorization.k8s.io/v1",
		Name:            name,
		Cluster:         "test",
		Data:            []byte(`{"object":{"kind":"ClusterRole"}}`),
	}
}

// Objects whose names are past the server's 4 KiB control line, up to the
// longest name the API server takes (524,216 bytes), are published among
// others on subjects within the limits, in every mode, without the
// connection ever dropping; each is found on the subject EscapeToken gives
// for its name, and its event carries the whole name.
func TestLongNamesStayWithinLimits(t *testing.T) {
	// Room for the events themselves, which carry the name several times:
	// the payload limit is another matter.
	srv := natstest.Start(t, natstest.Options{MaxPayload: 8 << 20})
	lengths := []int{10, 4097, 100_000, 524_216}
	for _, mode := range []struct {
		name string
		mode Mode
		ce   CEMode
	}{
		{"jetstream structured", ModeJetStream, CEStructured},
		{"jetstream binary", ModeJetStream, CEBinary},
		{"core", ModeCore, CEStructured},
	} {
		t.Run(mode.name, func(t *testing.T) {
			prefix := strings.ReplaceAll(mode.name, " ", "-")
			s := newSink(t, serverConfig(t, srv, map[string]string{
				"BRIDGE_NATS_MODE": string(mode.mode), "BRIDGE_NATS_CE_MODE": string(mode.ce),
				"BRIDGE_NATS_SUBJECT_PREFIX": prefix, "BRIDGE_NATS_STREAM": prefix,
			}))
			// Core mode keeps the subjects of before layouts, with the
			// version.
			filter := prefix + ".test.rbac_authorization_k8s_io.clusterroles._.*"
			if mode.mode == ModeCore {
				filter = prefix + ".test.rbac_authorization_k8s_io.v1.clusterroles._.*"
			}
			var sub *nats.Subscription
			if mode.mode == ModeCore {
				nc := srv.Conn(t)
				var err error
				if sub, err = nc.SubscribeSync(filter); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil { // the server has the subscription
					t.Fatal(err)
				}
			}
			var msgs []*wire.Message
			for i, n := range lengths {
				msgs = append(msgs, message("ns", i, 0), clusterRole(i, n))
			}
			if err := s.Publish(t.Context(), msgs); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if r := s.nc.Stats().Reconnects; r != 0 || s.Health() != nil {
				t.Fatalf("connection: %d reconnects, health %v", r, s.Health())
			}
			var got []*nats.Msg
			if sub != nil {
				for range lengths {
					m, err := sub.NextMsg(10 * time.Second)
					if err != nil {
						t.Fatalf("subscriber: %v", err)
					}
					got = append(got, m)
				}
			} else {
				for _, m := range streamMsgs(t, srv.Conn(t), prefix, filter) {
					got = append(got, &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
				}
			}
			if len(got) != len(lengths) {
				t.Fatalf("%d ClusterRoles read, want %d", len(got), len(lengths))
			}
			for i, m := range got {
				want := clusterRole(i, lengths[i])
				if wantSubject := filter[:len(filter)-1] + wire.EscapeToken(want.Name); m.Subject != wantSubject {
					t.Errorf("ClusterRole of %d bytes on %.80q..., want %.80q...", lengths[i], m.Subject, wantSubject)
				}
				if len(m.Subject) > wire.MaxSubjectLen {
					t.Errorf("subject of %d bytes, above wire.MaxSubjectLen", len(m.Subject))
				}
				// Binary mode sends an event whose headers would pass the
				// stream's 64 KiB in structured mode.
				structured := m.Header.Get(ContentTypeHeader) == wire.StructuredContentType
				if wantStructured := mode.ce == CEStructured || lengths[i] > 60_000; structured != wantStructured {
					t.Errorf("ClusterRole of %d bytes: structured mode %v, want %v", lengths[i], structured, wantStructured)
				}
				ev, err := decode(m)
				if err != nil {
					t.Fatal(err)
				}
				if ev.Name != want.Name {
					t.Errorf("event of the ClusterRole of %d bytes names one of %d bytes", lengths[i], len(ev.Name))
				}
			}
			if mode.mode == ModeJetStream {
				if n := natstest.StreamState(t, srv.Conn(t), prefix).Msgs; n != uint64(len(msgs)) {
					t.Errorf("stream holds %d messages, want %d", n, len(msgs))
				}
			}
		})
	}
}

// A message whose subject cannot be made is never sent: that message
// fails alone, as terminal, naming the object, and the connection stays.
// (wire's tests cover each reason a subject cannot be made.)
func TestSubjectUnmadeIsTerminal(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	s := newSink(t, serverConfig(t, srv, nil))
	bad := message("ns", 1, 0)
	bad.Cluster = "" // the default layout holds {cluster}
	msgs := []*wire.Message{message("ns", 0, 0), bad, message("ns", 2, 0)}
	errs := sink.PerMessage(s.Publish(t.Context(), msgs), len(msgs))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("good subjects failed: %v, %v", errs[0], errs[2])
	}
	if !sink.IsTerminal(errs[1]) || !containsAll(errs[1].Error(), bad.ID, "{cluster}") {
		t.Errorf("unmade subject: %v, want a terminal error naming the event and the placeholder", errs[1])
	}
	if r := s.nc.Stats().Reconnects; r != 0 || s.Health() != nil {
		t.Errorf("connection: %d reconnects, health %v", r, s.Health())
	}
	if n := natstest.StreamState(t, srv.Conn(t), "KUBE").Msgs; n != 2 {
		t.Errorf("stream holds %d messages, want 2", n)
	}
	var te *sink.TerminalError
	if !errors.As(errs[1], &te) {
		t.Fatal("not a TerminalError")
	}
}

// What the server says of a message it can never store is terminal.
func TestPublishErrorTerminal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		terminal bool
	}{
		{"max payload", nats.ErrMaxPayload, true},
		{"bad subject", nats.ErrBadSubject, true},
		{"stream message size", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}, true},
		{"headers past 64 KiB", &jetstream.APIError{ErrorCode: 10097, Description: "header size exceeds maximum allowed of 64k"}, true},
		{"no responders", nats.ErrNoResponders, false},
		{"timeout", nats.ErrTimeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sink.IsTerminal(publishError("kube.x", tc.err)); got != tc.terminal {
				t.Errorf("terminal = %v, want %v", got, tc.terminal)
			}
		})
	}
}
