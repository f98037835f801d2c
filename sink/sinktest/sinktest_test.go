package sinktest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func msg(subject, rv string) *wire.Message {
	return &wire.Message{Resource: configmaps, Subject: subject, ResourceVersion: rv}
}

func rvs(msgs []*wire.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Subject+"@"+m.ResourceVersion)
	}
	return out
}

// A message counts as accepted only when Respond reports it accepted;
// every message sent is an attempt.
func TestRecorderAcceptsWhatRespondAccepts(t *testing.T) {
	r := &Recorder{Respond: func(_ context.Context, call int, msgs []*wire.Message) error {
		if call == 1 {
			return &sink.BatchError{Errors: []error{nil, errors.New("refused")}}
		}
		return nil
	}}
	if err := r.Publish(t.Context(), []*wire.Message{msg("ns/a", "1"), msg("ns/b", "2")}); err == nil {
		t.Error("Publish hid Respond's error")
	}
	if err := r.Publish(t.Context(), []*wire.Message{msg("ns/b", "2")}); err != nil {
		t.Fatal(err)
	}
	if got, want := rvs(r.Accepted()), []string{"ns/a@1", "ns/b@2"}; !slices.Equal(got, want) {
		t.Errorf("Accepted %v, want %v", got, want)
	}
	if got, want := rvs(r.Attempts()), []string{"ns/a@1", "ns/b@2", "ns/b@2"}; !slices.Equal(got, want) {
		t.Errorf("Attempts %v, want %v", got, want)
	}
	if got := rvs(r.AcceptedOf("ns/b")); !slices.Equal(got, []string{"ns/b@2"}) {
		t.Errorf("AcceptedOf(ns/b) = %v", got)
	}
	if r.Len() != 2 || r.Calls() != 2 || len(r.Problems()) != 0 {
		t.Errorf("Len %d, Calls %d, Problems %v; want 2, 2, none", r.Len(), r.Calls(), r.Problems())
	}
	if r.Closed() {
		t.Error("closed before Close")
	}
	_ = r.Close(t.Context())
	if !r.Closed() {
		t.Error("not closed after Close")
	}
}

// A key in two calls at once, or going backwards within a batch, breaks
// the sink contract.
func TestRecorderFindsContractProblems(t *testing.T) {
	inside := make(chan struct{})
	release := make(chan struct{})
	r := &Recorder{Respond: func(_ context.Context, call int, _ []*wire.Message) error {
		if call == 1 {
			close(inside)
			<-release
		}
		return nil
	}}
	done := make(chan error)
	go func() { done <- r.Publish(context.Background(), []*wire.Message{msg("ns/a", "1")}) }()
	<-inside
	if !r.InFlight("ns/a") {
		t.Error("ns/a not in flight during its Publish")
	}
	_ = r.Publish(t.Context(), []*wire.Message{msg("ns/a", "2")})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = r.Publish(t.Context(), []*wire.Message{msg("ns/b", "5"), msg("ns/b", "4")})
	p := r.Problems()
	if len(p) != 2 || !strings.Contains(p[0], "two batches at once") || !strings.Contains(p[1], "out of order") {
		t.Errorf("Problems %q, want a key in two batches and one out of order", p)
	}
	if r.InFlight("ns/a") {
		t.Error("ns/a still in flight after its Publish returned")
	}
}
