package event

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// Event buffers lent by a pool. The pipeline writes every event it
// publishes with Encoder.Lease, into a buffer of the pool, and gives the
// buffer back with Lease.Release once it is done with the message: after
// the sink accepted it, after it was skipped for good, after an event
// without the object's content took its place, or after it was abandoned
// unpublished. Sinks get the message (Lease.Message) and never the lease,
// so only the pipeline can give a buffer back; wire.Message says what a
// sink may keep (nothing of the bytes once Publish returned).

// Lease is a message whose event bytes (Encoded, and Data within it) are
// lent by the encoder's pool until Release. It is not safe for concurrent
// use: one owner at a time holds it.
type Lease struct {
	msg wire.Message
	// buf holds the event's buffer, at its full capacity, for the pool;
	// nil when the event was too large to come from the pool.
	buf      *[]byte
	released bool
}

// Message is the leased message, to hand to a sink. Its bytes are valid
// until Release.
func (l *Lease) Message() *wire.Message { return &l.msg }

// Release gives the message's bytes back to the pool, to be written over
// by a later event, and clears Encoded and Data (with Poison on, it leaves
// them on the poisoned bytes). Call it once, when no
// sink can read the bytes any more: after the Publish that was given the
// message returned, and not while a library a sink used may still send
// them (the pipeline leaves the buffers of a Publish cut short by the end
// of its context to the garbage collector instead). A second call panics:
// it means the message was given back while something still held it.
func (l *Lease) Release() {
	if l.released {
		panic("event: lease of " + l.msg.ID + " released twice")
	}
	l.released = true
	buf := l.buf
	l.buf = nil
	if buf != nil {
		give(buf)
	}
	if poisoned.Load() {
		// The message keeps pointing at its poisoned bytes, so that a sink
		// that kept the message itself and encodes it after the release
		// writes garbage, not a well-formed event without data.
		return
	}
	l.msg.Encoded, l.msg.Data = nil, nil
}

// Lease turns d into a message, as Encode does, written into a buffer
// lent by the encoder's pool: call Release on the lease once no sink can
// read the message any more.
func (e Encoder) Lease(d *source.Delta) (*Lease, error) {
	l := &Lease{}
	buf, err := e.write(&l.msg, d, take)
	if err != nil {
		return nil, err
	}
	l.buf = buf
	return l, nil
}

// Pooled buffers come in size classes: 1 KiB, then four classes for each
// doubling (1 KiB, 1.25, 1.5, 1.75, 2, 2.5, ...) up to maxPooledBuffer,
// so that a buffer is at most a quarter larger than its event (past
// 1 KiB). A buffer goes back to the largest class it holds, whatever its
// size: one that append grew is pooled as well. Events larger than
// maxPooledBuffer get a buffer of their size, which the garbage collector
// takes back.
const (
	minClassShift = 10
	maxClassShift = 18 // maxPooledBuffer is 1<<maxClassShift
	numClasses    = (maxClassShift-minClassShift)*4 + 1
)

var classes [numClasses]sync.Pool

// classSize is the capacity of the buffers of class c.
func classSize(c int) int {
	base := 1 << (minClassShift + c/4)
	return base + c%4*base/4
}

// classFor is the smallest class whose buffers hold n bytes, or -1 when n
// is larger than every class.
func classFor(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	if n > maxPooledBuffer {
		return -1
	}
	shift := bits.Len(uint(n-1)) - 1 // 1<<shift < n <= 2<<shift
	base := 1 << shift
	quarter := (n - base + base/4 - 1) / (base / 4) // 1 to 4
	return (shift-minClassShift)*4 + quarter
}

// classOf is the largest class that a buffer of capacity c can serve, or
// -1 when c is below the smallest class or above the largest.
func classOf(c int) int {
	if c < 1<<minClassShift || c > maxPooledBuffer {
		return -1
	}
	shift := bits.Len(uint(c)) - 1 // 1<<shift <= c < 2<<shift
	base := 1 << shift
	return (shift-minClassShift)*4 + (c-base)/(base/4)
}

// take is an empty buffer with room for n bytes, from the pool when n
// fits a class.
func take(n int) *[]byte {
	c := classFor(n)
	if c < 0 {
		b := make([]byte, 0, n)
		return &b
	}
	if p, ok := classes[c].Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, classSize(c))
	return &b
}

// give puts buf back into the pool, poisoned first when Poison is on.
func give(buf *[]byte) {
	b := (*buf)[:cap(*buf)]
	c := classOf(cap(b))
	if poisoned.Load() {
		for i := range b {
			b[i] = PoisonByte
		}
	}
	if c < 0 {
		return
	}
	*buf = b[:0]
	classes[c].Put(buf)
}

// PoisonByte is what Poison writes over every byte of a released buffer.
// It is not valid UTF-8 nor JSON, so an event read from a released buffer
// cannot pass for one.
const PoisonByte = 0xdb

var poisoned atomic.Bool

// Poison makes Release write PoisonByte over every byte of a buffer
// before it goes back to the pool, while on is true, so that whatever
// still reads a message's bytes after its release reads garbage (and,
// under the race detector, races with the release). Tests turn it on; it
// costs a write of every byte. It returns the previous setting.
func Poison(on bool) bool { return poisoned.Swap(on) }
