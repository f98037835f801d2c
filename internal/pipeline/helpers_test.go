package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/sink/sinktest"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/wire"
)

var configmaps = source.Resource{
	GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
	Kind:                 "ConfigMap",
	Namespaced:           true,
}

// ns is the namespace of every test object.
const ns = "ns"

// mkDelta is a change to configmap ns/name with the given uid and
// resourceVersion; its object carries the same identity.
func mkDelta(typ source.DeltaType, name, uid string, rv int) source.Delta {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(strconv.Itoa(rv))
	return source.Delta{
		Type:            typ,
		Resource:        configmaps,
		Namespace:       ns,
		Name:            name,
		UID:             types.UID(uid),
		ResourceVersion: strconv.Itoa(rv),
		Object:          u,
	}
}

func subject(name string) string { return ns + "/" + name }

// accepted is one message the sink accepted.
type accepted struct {
	Subject string
	UID     string
	RV      int
	Action  string
}

// acceptedOf returns what s accepted for one object, in order.
func acceptedOf(s *sinktest.Recorder, subject string) []accepted {
	return acceptedList(s.AcceptedOf(subject))
}

// allAccepted returns everything s accepted, in order.
func allAccepted(s *sinktest.Recorder) []accepted { return acceptedList(s.Accepted()) }

func acceptedList(msgs []*wire.Message) []accepted {
	var out []accepted
	for _, m := range msgs {
		out = append(out, accepted{m.Subject, m.UID, mustAtoi(m.ResourceVersion), m.Action})
	}
	return out
}

// wasAccepted reports whether s accepted the delta r records.
func wasAccepted(s *sinktest.Recorder, r checkpoint.Record) bool {
	rv, err := strconv.Atoi(r.ResourceVersion)
	if err != nil || r.Resource != configmaps.Name() {
		return false
	}
	for _, m := range s.AcceptedOf(r.Key) {
		if m.UID == r.UID && mustAtoi(m.ResourceVersion) == rv && (m.Action == string(source.Deleted)) == r.Deleted {
			return true
		}
	}
	return false
}

// testRecorder keeps every record and checks, as each arrives, that the
// sink accepted its delta before.
type testRecorder struct {
	sink *sinktest.Recorder

	mu      sync.Mutex
	recs    []checkpoint.Record
	unacked []checkpoint.Record
}

var _ Recorder = (*testRecorder)(nil)

func (r *testRecorder) Record(recs ...checkpoint.Record) {
	for _, rec := range recs {
		ok := wasAccepted(r.sink, rec)
		r.mu.Lock()
		r.recs = append(r.recs, rec)
		if !ok {
			r.unacked = append(r.unacked, rec)
		}
		r.mu.Unlock()
	}
}

// rvsOf returns the resourceVersions recorded for key, in order.
func (r *testRecorder) rvsOf(key string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, rec := range r.recs {
		if rec.Key == key {
			out = append(out, mustAtoi(rec.ResourceVersion))
		}
	}
	return out
}

func (r *testRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

func (r *testRecorder) recordedUnacked() []checkpoint.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]checkpoint.Record(nil), r.unacked...)
}

// encodeFunc adapts a function to Encoder.
type encodeFunc func(d *source.Delta) (*wire.Message, error)

func (f encodeFunc) Encode(d *source.Delta) (*wire.Message, error) { return f(d) }

// harness is a pipeline with a test sink and recorder.
type harness struct {
	p    *Pipeline
	sink *sinktest.Recorder
	rec  *testRecorder
	logs *logtest.Buffer

	cancel context.CancelFunc
	done   chan error
}

// newHarness builds a pipeline around s, using the real event encoder
// unless enc is set. It does not start it.
func newHarness(t *testing.T, s *sinktest.Recorder, opts Options, enc Encoder) *harness {
	t.Helper()
	if enc == nil {
		enc = event.Encoder{Cluster: "test"}
	}
	h := &harness{sink: s, rec: &testRecorder{sink: s}, logs: &logtest.Buffer{}}
	h.p = New(s, enc, h.rec, opts, slog.New(slog.NewTextHandler(h.logs, nil)))
	return h
}

// start runs the pipeline until stop or the end of the test.
func (h *harness) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.p.Run(ctx) }()
	t.Cleanup(func() {
		// What a test leaves queued is abandoned: only another error is
		// wrong.
		if err := h.stopErr(t); err != nil && !errors.Is(err, ErrAbandoned) {
			t.Errorf("Run = %v, want nil or ErrAbandoned", err)
		}
	})
}

// stop cancels Run and waits for it to return, failing the test unless
// it returns nil.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	if err := h.stopErr(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// stopErr cancels Run, waits for it to return and returns its error.
func (h *harness) stopErr(t *testing.T) error {
	t.Helper()
	if h.done == nil {
		return nil
	}
	h.cancel()
	defer func() { h.done = nil }()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
		return nil
	}
}

// drain waits for everything queued so far to be published.
func (h *harness) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.p.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic("resourceVersion " + strconv.Quote(s) + " is not a number")
	}
	return n
}

func rvs(as []accepted) []int {
	out := make([]int, len(as))
	for i, a := range as {
		out[i] = a.RV
	}
	return out
}
