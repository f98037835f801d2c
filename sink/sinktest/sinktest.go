// Package sinktest provides Recorder, the sink.Sink that tests hand to a
// pipeline or a bridge in place of a bus.
//
// A Recorder keeps every message it is sent and every message it accepts,
// each in the order of its Publish calls, and checks on every call the
// part of the sink.Sink contract that its caller must keep: a key (a
// resource and a subject) is never in two Publish calls at once, and
// within a batch its resourceVersions only go up. What it finds is in
// Problems.
//
// By default a Recorder accepts every message; its Respond function, when
// set, decides the outcome of each call instead, and may block. A message
// counts as accepted when sink.PerMessage of Publish's result is nil for
// it. All methods are safe for concurrent use.
//
// Like every sink, a Recorder keeps nothing of the bytes of the messages
// it is given once Publish returned (see wire.Message): what it records
// are copies (Clone). Respond sees the messages themselves, and must not
// keep them either.
//
// KeepsNoBytes checks that a real sink keeps nothing either: it publishes
// messages, writes over their bytes as soon as Publish returned, and
// reads back what the bus holds.
package sinktest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/resourceversion"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

// Recorder is a sink.Sink that records what it is sent and accepts. The
// zero value accepts everything.
type Recorder struct {
	// Respond, when not nil, returns the result of Publish call number
	// call (counted from 1) for msgs: nil to accept them all, a
	// *sink.BatchError to fail some, any other error to fail them all.
	Respond func(ctx context.Context, call int, msgs []*wire.Message) error

	mu       sync.Mutex
	calls    int
	inflight map[key]bool
	problems []string
	attempts []*wire.Message
	accepted []*wire.Message
	byKey    map[string][]*wire.Message // accepted, by subject
	closed   bool
}

// key is what the sink contract orders messages by.
type key struct {
	resource schema.GroupVersionResource
	subject  string
}

var _ sink.Sink = (*Recorder)(nil)

// Publish records msgs, checks them against the contract, and returns
// what Respond says (nil without Respond).
func (r *Recorder) Publish(ctx context.Context, msgs []*wire.Message) error {
	keys := map[key]bool{}
	last := map[key]string{}
	r.mu.Lock()
	r.calls++
	call := r.calls
	if r.inflight == nil {
		r.inflight = map[key]bool{}
	}
	for _, m := range msgs {
		r.attempts = append(r.attempts, Clone(m))
	}
	for _, m := range msgs {
		k := key{m.Resource, m.Key()}
		if rv := m.ResourceVersion; resourceversion.Comparable(rv) {
			if prev, ok := last[k]; ok && !resourceversion.Before(prev, rv) {
				r.problems = append(r.problems, fmt.Sprintf("call %d: %s out of order in its batch", call, m.Key()))
			}
			last[k] = rv
		}
		if !keys[k] && r.inflight[k] {
			r.problems = append(r.problems, fmt.Sprintf("call %d: %s is in two batches at once", call, m.Key()))
		}
		keys[k] = true
	}
	for k := range keys {
		r.inflight[k] = true
	}
	r.mu.Unlock()

	var err error
	if r.Respond != nil {
		err = r.Respond(ctx, call, msgs)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[string][]*wire.Message{}
	}
	for i, e := range sink.PerMessage(err, len(msgs)) {
		if e == nil {
			m := Clone(msgs[i])
			r.accepted = append(r.accepted, m)
			r.byKey[m.Key()] = append(r.byKey[m.Key()], m)
		}
	}
	for k := range keys {
		delete(r.inflight, k)
	}
	return err
}

// Close marks the Recorder closed.
func (r *Recorder) Close(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// Closed reports whether Close was called.
func (r *Recorder) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Calls is the number of Publish calls so far.
func (r *Recorder) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// InFlight reports whether a Publish call holding a message with this
// subject is under way.
func (r *Recorder) InFlight(subject string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.inflight {
		if k.subject == subject {
			return true
		}
	}
	return false
}

// Accepted returns every message accepted so far, in order.
func (r *Recorder) Accepted() []*wire.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.accepted)
}

// AcceptedOf returns the messages accepted for one subject, in order.
func (r *Recorder) AcceptedOf(subject string) []*wire.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byKey[subject])
}

// Len is the number of messages accepted so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.accepted)
}

// Attempts returns every message Publish was called with, accepted or
// not, in order.
func (r *Recorder) Attempts() []*wire.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts)
}

// Problems returns the breaches of the sink contract seen so far.
func (r *Recorder) Problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// Clone is a copy of m that shares nothing with it: its bytes (Encoded,
// Data) are copies, with Data a sub-slice of Encoded again when it was
// one. A sink that must keep a message past Publish keeps a clone.
func Clone(m *wire.Message) *wire.Message {
	c := *m
	if m.Encoded == nil {
		c.Data = slices.Clone(m.Data)
		return &c
	}
	c.Encoded = slices.Clone(m.Encoded)
	if n, d := len(m.Encoded), len(m.Data); d > 0 && n > d && &m.Encoded[n-1-d] == &m.Data[0] {
		c.Data = c.Encoded[n-1-d : n-1 : n-1]
	} else {
		c.Data = slices.Clone(m.Data)
	}
	return &c
}
