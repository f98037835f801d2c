package source

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubebus/bridge/internal/rawobject"
)

// eventDecoder reads the events of a watch of the raw path, as the API
// server streams them in JSON: one event per line. Each event is copied
// once out of the connection's buffer, into a buffer of its own that its
// object then keeps; its object is read with rawobject.ScanEvent, without
// decoding it. Bookmarks and errors, small and rare, are decoded.
type eventDecoder struct {
	body io.ReadCloser
	r    *bufio.Reader
}

var _ watch.Decoder = (*eventDecoder)(nil)

// watchBufferSize is the read buffer of each watch stream. A source has
// one stream open per resource for as long as it runs, so the buffer is
// sized for the common object (ConfigMaps, Pods, most custom objects): a
// longer event line is gathered from several reads, at the cost of one
// more copy.
const watchBufferSize = 16 << 10

func newEventDecoder(body io.ReadCloser) *eventDecoder {
	return &eventDecoder{body: body, r: bufio.NewReaderSize(body, watchBufferSize)}
}

// Decode returns the next event. io.EOF is the clean end of the stream;
// an event cut short by it is io.ErrUnexpectedEOF.
func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.line(nil)
	if err != nil {
		return "", nil, err
	}
	var ev rawobject.Event
	for {
		if ev, err = rawobject.ScanEvent(frame); err == nil {
			break
		}
		if !cutShort(frame, err) {
			return "", nil, fmt.Errorf("source: watch event: %w", err)
		}
		// An event written over several lines (pretty-printed): read on.
		if frame, err = d.line(frame); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return "", nil, err
		}
	}
	switch t := watch.EventType(ev.Type); t {
	case watch.Added, watch.Modified, watch.Deleted:
		return t, newRawObject(ev.Object, ev.Meta), nil
	case watch.Bookmark:
		var b metav1.PartialObjectMetadata
		if err := json.Unmarshal(ev.Object, &b); err != nil {
			return "", nil, fmt.Errorf("source: watch bookmark: %w", err)
		}
		return t, &rawObject{TypeMeta: b.TypeMeta, ObjectMeta: b.ObjectMeta}, nil
	case watch.Error:
		var st metav1.Status
		if err := json.Unmarshal(ev.Object, &st); err != nil {
			return "", nil, fmt.Errorf("source: watch error event: %w", err)
		}
		return t, &st, nil
	default:
		return "", nil, fmt.Errorf("source: got invalid watch event type: %q", ev.Type)
	}
}

// line appends the next line of the stream to frame, skipping blank lines
// when frame is empty. The API server writes each event on one line: the
// line is then copied once, into a buffer of exactly its size; a line
// longer than the reader's buffer is gathered from several reads, and
// held in a buffer of about its size. io.EOF
// means that the stream ended before another line.
func (d *eventDecoder) line(frame []byte) ([]byte, error) {
	for {
		b, err := d.r.ReadSlice('\n')
		if len(frame) == 0 && err == nil && !blank(b) {
			return bytes.Clone(b), nil // the common case
		}
		frame = append(frame, b...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // a line longer than the reader's buffer
		case errors.Is(err, io.EOF) && len(b) == 0:
			return frame, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		case blank(frame):
			if err != nil {
				return nil, io.EOF
			}
			frame = frame[:0]
			continue
		}
		return atItsSize(frame), nil // a line, or the stream's last bytes
	}
}

// atItsSize returns b, or a copy of it when its buffer has grown well
// past it: a line gathered from several reads.
func atItsSize(b []byte) []byte {
	if cap(b)-len(b) > len(b)/8 {
		return bytes.Clone(b)
	}
	return b
}

// cutShort reports whether err says that frame ended in the middle of an
// event.
func cutShort(frame []byte, err error) bool {
	var se *rawobject.SyntaxError
	return errors.As(err, &se) && se.Offset >= len(bytes.TrimRight(frame, " \t\r\n"))
}

func blank(b []byte) bool { return len(bytes.TrimLeft(b, " \t\r\n")) == 0 }

// Close closes the watch's body.
func (d *eventDecoder) Close() { _ = d.body.Close() }
