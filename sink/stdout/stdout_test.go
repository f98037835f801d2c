package stdout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

func message(subject string, i int, data string) *wire.Message {
	return &wire.Message{
		ID:              fmt.Sprintf("%s#%d", subject, i),
		Source:          "/clusters/test/api/v1/configmaps",
		Type:            "io.kubebus.object.updated",
		Subject:         subject,
		Time:            time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Action:          "updated",
		Resource:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		ResourceVersion: fmt.Sprint(i),
		UID:             "uid-" + subject,
		Kind:            "ConfigMap",
		APIVersion:      "v1",
		Name:            subject,
		Cluster:         "test",
		Data:            json.RawMessage(data),
	}
}

func batch(subject string, n int, data string) []*wire.Message {
	msgs := make([]*wire.Message, n)
	for i := range msgs {
		msgs[i] = message(subject, i, data)
	}
	return msgs
}

// decodeLines splits out into lines and decodes each one. Every line,
// including the last, must end in a newline.
func decodeLines(t *testing.T, out []byte) []wire.Message {
	t.Helper()
	if len(out) > 0 && out[len(out)-1] != '\n' {
		t.Fatalf("output does not end in a newline: ...%q", out[max(0, len(out)-40):])
	}
	var msgs []wire.Message
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m wire.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not an event: %v: %.200s", len(msgs)+1, err, sc.Bytes())
		}
		msgs = append(msgs, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func ids(msgs []wire.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func TestPublishWritesOneLinePerMessageInOrder(t *testing.T) {
	var out bytes.Buffer
	s := New(&out)
	first := batch("ns/a", 3, `{"object":{"n":1}}`)
	second := batch("ns/b", 2, `{"object":{"n":2}}`)
	for _, b := range [][]*wire.Message{first, second} {
		if err := s.Publish(context.Background(), b); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	// Publish returns only once its lines reached the writer.
	got := decodeLines(t, out.Bytes())
	want := []string{"ns/a#0", "ns/a#1", "ns/a#2", "ns/b#0", "ns/b#1"}
	if strings.Join(ids(got), ",") != strings.Join(want, ",") {
		t.Fatalf("ids = %v, want %v", ids(got), want)
	}
	if got[3].Subject != "ns/b" || got[3].ResourceVersion != "0" || string(got[3].Data) != `{"object":{"n":2}}` {
		t.Errorf("line 4 decoded to %+v", got[3])
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestPublishEmptyBatch(t *testing.T) {
	var out bytes.Buffer
	s := New(&out)
	if err := s.Publish(context.Background(), nil); err != nil {
		t.Fatalf("Publish(nil): %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("wrote %q for an empty batch", out.String())
	}
}

// TestConcurrentPublishDoesNotInterleave publishes batches whose lines are
// larger than the sink's buffer from many goroutines at once, into a
// writer that is not safe for concurrent use, and checks that every batch
// comes out whole and in order. Run it with -race.
func TestConcurrentPublishDoesNotInterleave(t *testing.T) {
	const (
		publishers = 8
		batches    = 5
		perBatch   = 4
	)
	// 20 KiB per line: a batch is larger than the sink's 64 KiB buffer,
	// so it reaches the writer in several writes.
	data := `{"object":{"pad":"` + strings.Repeat("x", 20<<10) + `"}}`
	var out bytes.Buffer
	w := &countingWriter{w: &out}
	s := New(w)

	var wg sync.WaitGroup
	errs := make(chan error, publishers*batches)
	for p := range publishers {
		wg.Go(func() {
			for b := range batches {
				if err := s.Publish(context.Background(), batch(fmt.Sprintf("p%d/b%d", p, b), perBatch, data)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Publish: %v", err)
	}
	if w.writes <= publishers*batches {
		t.Fatalf("the writer saw %d writes for %d batches; the test needs batches split across writes", w.writes, publishers*batches)
	}

	got := decodeLines(t, out.Bytes())
	if len(got) != publishers*batches*perBatch {
		t.Fatalf("got %d lines, want %d", len(got), publishers*batches*perBatch)
	}
	seen := map[string]bool{}
	for start := 0; start < len(got); start += perBatch {
		subject := got[start].Subject
		if seen[subject] {
			t.Fatalf("batch %s appears twice", subject)
		}
		seen[subject] = true
		for i := range perBatch {
			if want := fmt.Sprintf("%s#%d", subject, i); got[start+i].ID != want {
				t.Fatalf("line %d is %s, want %s: batches interleaved", start+i+1, got[start+i].ID, want)
			}
		}
	}
}

// countingWriter counts writes. It is deliberately unsynchronised: the
// race detector reports it if the sink lets two writes overlap.
type countingWriter struct {
	w      io.Writer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.w.Write(p)
}

var errDiskFull = errors.New("disk full")

// flakyWriter fails its first fail writes, writing nothing, then passes
// writes through.
type flakyWriter struct {
	out  bytes.Buffer
	fail int
}

func (f *flakyWriter) Write(p []byte) (int, error) {
	if f.fail > 0 {
		f.fail--
		return 0, errDiskFull
	}
	return f.out.Write(p)
}

func TestPublishWriteFailure(t *testing.T) {
	tests := []struct {
		name string
		data string // payload size decides whether the failure is on a write or the flush
	}{
		{"failure on flush", `{"object":{}}`},
		{"failure on a write larger than the buffer", `{"object":{"pad":"` + strings.Repeat("y", 70<<10) + `"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &flakyWriter{fail: 1}
			s := New(w)
			msgs := batch("ns/a", 2, tt.data)

			err := s.Publish(context.Background(), msgs)
			if err == nil {
				t.Fatal("Publish succeeded on a failing writer")
			}
			if !errors.Is(err, errDiskFull) {
				t.Errorf("error %v does not wrap the writer's error", err)
			}
			if sink.IsTerminal(err) {
				t.Errorf("a write failure must be retryable, got terminal %v", err)
			}
			if !strings.HasPrefix(err.Error(), "stdout sink: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			var be *sink.BatchError
			if errors.As(err, &be) {
				t.Errorf("a write failure fails the whole batch, got %v", be)
			}

			// The writer recovers: a retry writes the whole batch, and
			// nothing from the failed attempt lingers in the buffer.
			if err := s.Publish(context.Background(), msgs); err != nil {
				t.Fatalf("retry: %v", err)
			}
			got := decodeLines(t, w.out.Bytes())
			if strings.Join(ids(got), ",") != "ns/a#0,ns/a#1" {
				t.Errorf("after retry the writer holds %v, want exactly the batch once", ids(got))
			}
		})
	}
}

func TestPublishUnencodableMessageIsTerminal(t *testing.T) {
	var out bytes.Buffer
	s := New(&out)
	msgs := batch("ns/a", 3, `{"object":{}}`)
	msgs[1].Data = json.RawMessage(`{"object":`)

	err := s.Publish(context.Background(), msgs)
	var be *sink.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Publish = %v, want a *sink.BatchError", err)
	}
	perMsg := sink.PerMessage(err, len(msgs))
	for i, want := range []bool{false, true, false} {
		if failed := perMsg[i] != nil; failed != want {
			t.Errorf("message %d failed = %v, want %v", i, failed, want)
		}
	}
	if !sink.IsTerminal(perMsg[1]) {
		t.Errorf("message 1: %v is not terminal", perMsg[1])
	}
	got := decodeLines(t, out.Bytes())
	if strings.Join(ids(got), ",") != "ns/a#0,ns/a#2" {
		t.Errorf("wrote %v, want the two encodable messages", ids(got))
	}
}

func TestPublishCancelled(t *testing.T) {
	var out bytes.Buffer
	s := New(&out)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Publish(ctx, batch("ns/a", 1, `{}`))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Publish = %v, want context.Canceled", err)
	}
	if out.Len() != 0 {
		t.Errorf("wrote %q after the context ended", out.String())
	}
}

func TestPublishToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := New(f)
	if err := s.Publish(context.Background(), batch("ns/a", 2, `{"object":{}}`)); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	// Read through a separate handle: the lines are in the file, not in a
	// buffer of the sink.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(decodeLines(t, b)); strings.Join(got, ",") != "ns/a#0,ns/a#1" {
		t.Errorf("file holds %v", got)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	// Close does not close the writer.
	if _, err := f.WriteString(""); err != nil {
		t.Errorf("file closed by the sink: %v", err)
	}
}

// encodedMessage is message(...) holding its encoding, as the event
// encoder makes it: Encoded the whole event, Data its last member.
func encodedMessage(t *testing.T, subject string, i int, data string) *wire.Message {
	t.Helper()
	m := message(subject, i, data)
	enc, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	m.Encoded = enc
	m.Data = enc[len(enc)-1-len(data) : len(enc)-1 : len(enc)-1]
	return m
}

// An event the encoder wrote in one buffer is written as it is: no copy,
// no compaction.
func TestEncodedMessageIsWrittenAsItIs(t *testing.T) {
	m := encodedMessage(t, "ns/a", 1, `{"object":{"a":1}}`)
	line, err := marshalLine(m)
	if err != nil {
		t.Fatal(err)
	}
	if &line[0] != &m.Encoded[0] {
		t.Error("the line is a copy of the encoded event")
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = marshalLine(m) }); allocs != 0 {
		t.Errorf("marshalLine of an encoded event allocates %.0f times", allocs)
	}
	var out bytes.Buffer
	if err := New(&out).Publish(t.Context(), []*wire.Message{m, encodedMessage(t, "ns/b", 2, "{\"object\":\n{\"b\":2}}")}); err != nil {
		t.Fatal(err)
	}
	if got := ids(decodeLines(t, out.Bytes())); strings.Join(got, ",") != "ns/a#1,ns/b#2" {
		t.Errorf("lines %v: a line break inside an encoded event must still be compacted away", got)
	}
}
