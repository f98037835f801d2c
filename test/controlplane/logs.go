package controlplane

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

const (
	tailBytes     = 32 << 10 // output kept in memory per process for error messages
	errorTailRows = 30       // lines of it quoted in an error
	maxLineBytes  = 64 << 10 // a longer unterminated line is written out as is
)

// processLog is where one component's output goes: a log file in the
// working directory or the caller's shared writer, plus an in-memory tail.
type processLog struct {
	name  string
	tail  *tailBuffer
	sink  io.Writer
	close func() error
}

// newProcessLog opens <dir>/<name>.log, or prefixes lines for shared when
// the caller gave a writer.
func newProcessLog(name, dir string, shared *syncWriter) (*processLog, error) {
	l := &processLog{name: name, tail: &tailBuffer{}}
	if shared != nil {
		lw := &lineWriter{prefix: name + ": ", out: shared}
		l.sink, l.close = lw, lw.flush
		return l, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("controlplane: opening %s log: %w", name, err)
	}
	l.sink = f
	l.close = func() error {
		if err := f.Close(); err != nil {
			return fmt.Errorf("controlplane: closing %s log: %w", name, err)
		}
		return nil
	}
	return l, nil
}

// writer returns the writer for a newly started process and forgets the
// output of earlier ones, so that error messages quote only this run.
func (l *processLog) writer() io.Writer {
	l.tail.reset()
	return teeWriter{sink: l.sink, tail: l.tail}
}

// errorTail formats the end of the output for an error message.
func (l *processLog) errorTail() string {
	return fmt.Sprintf("\n--- last lines of %s output ---\n%s--- end of %s output ---", l.name, l.tail.lastLines(errorTailRows), l.name)
}

// teeWriter copies to the tail and, best effort, to the sink. It never
// fails: a failing Write would make os/exec stop draining the child's pipe
// and the child would then die or block on its next log line.
type teeWriter struct {
	sink io.Writer
	tail *tailBuffer
}

func (t teeWriter) Write(p []byte) (int, error) {
	_, _ = t.tail.Write(p)
	_, _ = t.sink.Write(p)
	return len(p), nil
}

// tailBuffer keeps roughly the last tailBytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}

func (t *tailBuffer) contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Contains(t.buf, []byte(s))
}

// lastLines returns up to n trailing lines, newline-terminated.
func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimRight(t.buf, "\n")
	if len(b) == 0 {
		return "(no output)\n"
	}
	start := len(b)
	for i := 0; i < n && start > 0; i++ {
		start = bytes.LastIndexByte(b[:start], '\n')
		if start < 0 {
			start = 0
			break
		}
	}
	return string(bytes.TrimLeft(b[start:], "\n")) + "\n"
}

// syncWriter serialises writes from both processes to the caller's writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// lineWriter writes whole lines, each with a prefix, so that the two
// processes' lines do not interleave mid-line in a shared writer. It is
// called by one goroutine at a time (os/exec uses one copier when Stdout
// and Stderr are the same writer), except for flush after the process has
// exited; mu covers that.
type lineWriter struct {
	mu     sync.Mutex
	prefix string
	out    io.Writer
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	start := 0
	for {
		i := bytes.IndexByte(l.buf[start:], '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[start : start+i+1])
		start += i + 1
	}
	l.buf = l.buf[:copy(l.buf, l.buf[start:])]
	if len(l.buf) > maxLineBytes {
		l.emit(append(l.buf, '\n'))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func (l *lineWriter) emit(line []byte) {
	msg := make([]byte, 0, len(l.prefix)+len(line))
	msg = append(append(msg, l.prefix...), line...)
	_, _ = l.out.Write(msg)
}

// flush writes out an unterminated last line.
func (l *lineWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(append(l.buf, '\n'))
		l.buf = l.buf[:0]
	}
	return nil
}
