package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// WrapTransport wraps the transport of the API client given to New
// (rest.Config.Wrap(source.WrapTransport)), so that the source learns, for
// each of its lists and watches, whether the answer is still arriving and
// how reading it ended: what tells a watch that the API server ended from
// a connection that was dropped, and a list that is slow from one that
// stalled. It also sees every answer 429 Too Many Requests, which
// client-go retries within the call without a word: the source counts
// them (ThrottleObserver) and logs them. Requests that are not the
// source's pass through untouched. Without it, Check fails.
func WrapTransport(rt http.RoundTripper) http.RoundTripper { return &transport{rt: rt} }

type transport struct{ rt http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, ok := req.Context().Value(streamKey{}).(*stream)
	if !ok {
		return t.rt.RoundTrip(req)
	}
	st.attempt()
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusTooManyRequests && st.throttled != nil {
		st.throttled(resp.Header.Get("Retry-After"))
	}
	st.reads.Add(1) // the headers
	resp.Body = &streamBody{ReadCloser: resp.Body, st: st}
	return resp, nil
}

// stream is what the transport tells the source of one list or watch
// call: how many requests were sent for it (client-go sends one again
// after a 429 with Retry-After, for example), how many times its answer
// arrived in part, and how reading the latest answer ended.
type stream struct {
	attempts atomic.Int64
	// reads counts the latest answers' headers and the reads of their
	// bodies that returned bytes.
	reads atomic.Int64
	// end is how reading the latest answer's body ended; nil while it is
	// being read.
	end atomic.Pointer[streamEnd]
	// throttled, when set, is told of each answer 429, with its
	// Retry-After header ("" without one).
	throttled func(retryAfter string)
}

type streamEnd struct{ err error }

// errClosedEarly is how a body closed before it was read to its end ended.
var errClosedEarly = errors.New("closed before its end")

type streamKey struct{}

// withStream has the transport report the call made with ctx to st.
func withStream(ctx context.Context, st *stream) context.Context {
	return context.WithValue(ctx, streamKey{}, st)
}

// streamOf is the stream the call made with ctx reports to, or nil.
func streamOf(ctx context.Context) *stream {
	st, _ := ctx.Value(streamKey{}).(*stream)
	return st
}

// attempt records a request sent: the answer to read is now its own.
func (st *stream) attempt() {
	st.attempts.Add(1)
	st.end.Store(nil)
}

// ended records how reading the answer's body ended; the first end holds.
func (st *stream) ended(err error) { st.end.CompareAndSwap(nil, &streamEnd{err: err}) }

// endedCleanly reports whether the answer's body was read to its very end:
// the terminating chunk of HTTP/1.1, or HTTP/2's end of stream, which
// only the API server sends. A connection reset, dropped or timed out
// midway ends it with another error, though client-go's watch then ends
// just as quietly. err is how it ended otherwise, nil if it has not.
func (st *stream) endedCleanly() (clean bool, err error) {
	e := st.end.Load()
	switch {
	case e == nil:
		return false, nil
	case errors.Is(e.err, io.EOF):
		return true, nil
	default:
		return false, e.err
	}
}

// streamBody reports the reading of an answer's body to its stream, at the
// cost of one atomic add per read.
type streamBody struct {
	io.ReadCloser
	st *stream
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.st.reads.Add(1)
	}
	if err != nil {
		b.st.ended(err)
	}
	return n, err
}

func (b *streamBody) Close() error {
	b.st.ended(errClosedEarly)
	return b.ReadCloser.Close()
}
