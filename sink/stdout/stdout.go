// Package stdout is a sink that writes each message as one line of JSON, a
// CloudEvents structured-mode event, to a writer (standard output by
// default).
//
// Publish returns once every line of the batch has been written to the
// writer in full and, when the writer can sync (an *os.File that is a regular
// file), synced. Lines of one batch are written in batch order.
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
	"sync"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

// Sink writes JSON lines. It is safe for concurrent use: batches are
// written one at a time, never interleaved.
type Sink struct {
	mu  sync.Mutex
	w   io.Writer
	buf *bufio.Writer
}

var _ sink.Sink = (*Sink)(nil)

// New returns a sink that writes to w. When w is nil it writes to os.Stdout.
func New(w io.Writer) *Sink {
	if w == nil {
		w = os.Stdout
	}
	return &Sink{w: w, buf: bufio.NewWriterSize(w, 64<<10)}
}

// Publish writes one line per message. A message that cannot be encoded is
// a terminal failure of that message alone; a failed write fails the batch
// and may be retried.
func (s *Sink) Publish(ctx context.Context, msgs []*wire.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	var errs []error
	for i, m := range msgs {
		line, err := marshalLine(m)
		if err != nil {
			if errs == nil {
				errs = make([]error, len(msgs))
			}
			errs[i] = sink.Terminal(fmt.Errorf("stdout sink: encode event %s: %w", m.ID, err))
			continue
		}
		_, err = s.buf.Write(line)
		if err == nil {
			err = s.buf.WriteByte('\n')
		}
		if err != nil {
			s.buf.Reset(s.w)
			return fmt.Errorf("stdout sink: write: %w", err)
		}
	}
	if err := s.buf.Flush(); err != nil {
		s.buf.Reset(s.w)
		return fmt.Errorf("stdout sink: write: %w", err)
	}
	if f, ok := s.w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("stdout sink: sync: %w", err)
			}
		}
	}
	if errs != nil {
		return &sink.BatchError{Errors: errs}
	}
	return nil
}

// marshalLine is m's event as one line, without its newline. An event the
// encoder wrote in one buffer (Encoded) is written as it is, when it holds
// no line break: the encoder checked it, and compacts what it writes but
// an object as the API server sent it, which is compact too. Otherwise
// MarshalJSON writes Data as it is, so here it is checked and compacted
// first, so that a line is always one JSON value, without a newline inside.
func marshalLine(m *wire.Message) ([]byte, error) {
	if m.Encoded != nil {
		if line, err := m.MarshalJSON(); err == nil && &line[0] == &m.Encoded[0] && !bytes.ContainsAny(line, "\r\n") {
			return line, nil
		}
	}
	if len(m.Data) > 0 {
		var data bytes.Buffer
		if err := json.Compact(&data, m.Data); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		c := *m
		c.Data = data.Bytes()
		m = &c
	}
	return m.MarshalJSON()
}

// Close flushes anything buffered. It does not close the writer. A write
// to a writer that blocks is not cut short: the flush is one write of at
// most the buffer, to a local file or pipe.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.buf.Flush(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("stdout sink: flush: %w", err)
	}
	return nil
}
