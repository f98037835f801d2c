package nats

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/test/natstest"
)

// fakeFuture is a PubAckFuture whose outcome the test sets.
type fakeFuture struct {
	ok       chan *jetstream.PubAck
	err      chan error
	msg      *nats.Msg
	errCalls int
}

func (f *fakeFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *fakeFuture) Err() <-chan error            { f.errCalls++; return f.err }
func (f *fakeFuture) Msg() *nats.Msg               { return f.msg }

func newFake() *fakeFuture {
	return &fakeFuture{ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1), msg: &nats.Msg{Subject: "s"}}
}

// TestAwaitAck checks that a future's outcome is taken whichever way it
// ends: an ack already in (without making the error channel), an error,
// the caller's context, and an ack that comes later.
func TestAwaitAck(t *testing.T) {
	// ack already in: no Err call
	f := newFake()
	f.ok <- &jetstream.PubAck{Stream: "S", Sequence: 1}
	ack, err := awaitAck(context.Background(), f)
	if err != nil || ack.Sequence != 1 || f.errCalls != 0 {
		t.Fatalf("ack in: %v %v %d", ack, err, f.errCalls)
	}
	// error in: returned, wrapped
	f = newFake()
	boom := errors.New("boom")
	f.err <- boom
	ack, err = awaitAck(context.Background(), f)
	if !errors.Is(err, boom) || ack != nil {
		t.Fatalf("err in: %v %v", ack, err)
	}
	// ctx done, nothing in
	f = newFake()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ack, err = awaitAck(ctx, f)
	if !errors.Is(err, context.Canceled) || ack != nil {
		t.Fatalf("ctx: %v %v", ack, err)
	}
	// ctx done, ack in: the ack wins (the old code picked at random)
	f = newFake()
	f.ok <- &jetstream.PubAck{Stream: "S", Sequence: 2}
	ack, err = awaitAck(ctx, f)
	if err != nil || ack.Sequence != 2 {
		t.Fatalf("ctx+ack: %v %v", ack, err)
	}
	// ack arrives late
	f = newFake()
	go func() { f.ok <- &jetstream.PubAck{Stream: "S", Sequence: 3} }()
	ack, err = awaitAck(context.Background(), f)
	if err != nil || ack.Sequence != 3 {
		t.Fatalf("late: %v %v", ack, err)
	}
}

// TestHeadersShareNoValue checks that adding a value to any header of an
// encoded message leaves every other header as it was, though their
// values share one array: in both content modes, and for a binary event
// sent in structured mode because its headers are too long.
func TestHeadersShareNoValue(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	for _, mode := range []CEMode{CEStructured, CEBinary} {
		for _, long := range []bool{false, true} {
			s := newSink(t, serverConfig(t, srv, map[string]string{"BRIDGE_NATS_CE_MODE": string(mode), "BRIDGE_NATS_STREAM": "STATE", "BRIDGE_NATS_SUBJECT_PREFIX": "kube.state"}))
			m := deleted(message("team-a", 5, 3))
			m.View = "v1:abc"
			if long {
				m.Name = strings.Repeat("n", 70_000)
				m.Subject = "team-a/" + m.Name
			}
			nm, err := s.encode(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"Nats-Expected-Stream", "Nats-TTL", "Bridge-View", "Nats-Msg-Id"} {
				if nm.Header.Get(k) == "" {
					t.Errorf("%s long=%v: %s missing", mode, long, k)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(nm.Header)) {
				if len(nm.Header[k]) != 1 {
					t.Errorf("%s: %d values", k, len(nm.Header[k]))
				}
				before := maps.Clone(nm.Header)
				for kk, v := range before {
					before[kk] = slices.Clone(v)
				}
				nm.Header.Add(k, "ADDED")
				for kk, v := range before {
					got := nm.Header[kk]
					if kk == k {
						got = got[:len(got)-1]
					}
					if !slices.Equal(got, v) {
						t.Errorf("%s long=%v: Add(%s) changed %s: %q -> %q", mode, long, k, kk, v, nm.Header[kk])
					}
				}
				nm.Header[k] = before[k]
			}
		}
	}
}
