package event

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/kubebus/bridge/source"
)

// leaseDeltas are the deltas of every path the encoder writes, for both
// fixtures, the old object included once.
func leaseDeltas(t *testing.T) []pathDelta {
	t.Helper()
	var out []pathDelta
	for _, fx := range fixtures {
		data := readFixture(t, fx.name)
		withOld := parsedDelta(t, fx.resource, data, false)
		withOld.OldObject = parsedDelta(t, fx.resource, data, false).Object
		for _, pd := range append(pathDeltas(t, fx.resource, data), pathDelta{"parsed with the old object", withOld}) {
			pd.name = fx.name + "/" + pd.name
			out = append(out, pd)
		}
	}
	return out
}

// A leased message is the message Encode makes, byte for byte, in one
// buffer with Data its sub-slice, whatever the buffer the pool lends held
// before.
func TestLeaseIsTheEncodedMessage(t *testing.T) {
	defer Poison(Poison(true))
	enc := Encoder{Cluster: "prod"}
	for _, tt := range leaseDeltas(t) {
		t.Run(tt.name, func(t *testing.T) {
			want, err := enc.Encode(&tt.d)
			if err != nil {
				t.Fatal(err)
			}
			// Twice: the second lease may get the buffer of the first,
			// poisoned.
			for range 2 {
				l, err := enc.Lease(&tt.d)
				if err != nil {
					t.Fatal(err)
				}
				got := l.Message()
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("leased message differs from the encoded one\n got %.400s\nwant %.400s", got.Encoded, want.Encoded)
				}
				n, d := len(got.Encoded), len(got.Data)
				if &got.Encoded[n-1-d] != &got.Data[0] || cap(got.Data) != d {
					t.Fatal("Data is not the sub-slice of Encoded before its closing brace")
				}
				if ev, _ := got.MarshalJSON(); &ev[0] != &got.Encoded[0] {
					t.Error("MarshalJSON does not hand out the leased buffer")
				}
				l.Release()
			}
		})
	}
}

// An event's buffer is at most a quarter larger than the event, past the
// smallest class, and goes back to a class it can serve.
func TestSizeClasses(t *testing.T) {
	for c := range numClasses {
		if got := classOf(classSize(c)); got != c {
			t.Errorf("class of a buffer of %d bytes is %d, want %d", classSize(c), got, c)
		}
		if c > 0 && classSize(c) <= classSize(c-1) {
			t.Errorf("class %d (%d bytes) is not larger than class %d (%d bytes)", c, classSize(c), c-1, classSize(c-1))
		}
	}
	if classSize(numClasses-1) != maxPooledBuffer {
		t.Errorf("largest class is %d bytes, want %d", classSize(numClasses-1), maxPooledBuffer)
	}
	for n := 1; n <= maxPooledBuffer+10; n += 1 + n/512 {
		c := classFor(n)
		if n > maxPooledBuffer {
			if c != -1 {
				t.Errorf("%d bytes: class %d, want none", n, c)
			}
			continue
		}
		size := classSize(c)
		if size < n {
			t.Fatalf("%d bytes: class %d holds %d", n, c, size)
		}
		if n > 1<<minClassShift && size > n+n/4 {
			t.Errorf("%d bytes: class %d of %d bytes wastes more than a quarter", n, c, size)
		}
		if c > 0 && classSize(c-1) >= n {
			t.Errorf("%d bytes: class %d, but class %d holds them", n, c, c-1)
		}
		// A buffer of any capacity serves the class below it.
		if got := classOf(n); got >= 0 && classSize(got) > n {
			t.Errorf("a buffer of %d bytes goes back to class %d of %d bytes", n, got, classSize(got))
		}
	}
	if classOf(1<<minClassShift-1) != -1 || classOf(maxPooledBuffer+1) != -1 {
		t.Error("buffers outside the classes go back to one")
	}
}

// Release gives the buffer back once: the message no longer shows the
// bytes, poisoned bytes show what still reads them, a later lease of an
// event of the same size gets the buffer again, and a second Release
// panics.
func TestReleaseOnce(t *testing.T) {
	defer Poison(Poison(true))
	enc := Encoder{Cluster: "prod"}
	d := leaseDeltas(t)[0].d
	l, err := enc.Lease(&d)
	if err != nil {
		t.Fatal(err)
	}
	kept := l.Message().Encoded
	l.Release()
	if len(kept) == 0 || bytes.Count(kept, []byte{PoisonByte}) != len(kept) {
		t.Errorf("a released buffer still holds its event: %.100q", kept)
	}
	// A sink that kept the message itself reads garbage, not an event
	// without data.
	if m := l.Message(); len(m.Encoded) == 0 || bytes.Count(m.Encoded, []byte{PoisonByte}) != len(m.Encoded) {
		t.Errorf("a released message, with poisoning on, shows %.100q, want poisoned bytes", m.Encoded)
	}
	if b, err := l.Message().MarshalJSON(); err == nil && json.Valid(b) {
		t.Errorf("a released message still encodes as an event: %.100q", b)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "released twice") {
				t.Errorf("second Release: recovered %v, want a panic", r)
			}
		}()
		l.Release()
	}()

	// The pool may drop what it is given (under the race detector it drops
	// some on purpose; a collection empties it): try until a buffer comes
	// back.
	for range 1000 {
		first := lease(t, enc, &d)
		buf := &first.Message().Encoded[0]
		first.Release()
		again := lease(t, enc, &d)
		reused := &again.Message().Encoded[0] == buf
		again.Release()
		if reused {
			return
		}
	}
	t.Error("a released buffer never came back for an event of its size")
}

func lease(t *testing.T, enc Encoder, d *source.Delta) *Lease {
	t.Helper()
	l, err := enc.Lease(d)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// An event larger than the largest class gets a buffer of its own, which
// Release leaves to the garbage collector.
func TestLeaseLargerThanThePool(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	d := baseDelta()
	d.Object.Object["data"] = map[string]any{"big": strings.Repeat("x", maxPooledBuffer)}
	want, err := enc.Encode(&d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := enc.Lease(&d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Message().Encoded, want.Encoded) {
		t.Fatal("a large leased event differs from the encoded one")
	}
	l.Release()
}

// A delta that cannot be encoded leases nothing.
func TestLeaseFailure(t *testing.T) {
	d := baseDelta()
	d.Object.Object["bad"] = math.NaN()
	if l, err := (Encoder{Cluster: "prod"}).Lease(&d); err == nil || l != nil {
		t.Fatalf("Lease of an object JSON cannot hold: %v, %v", l, err)
	}
}

// Without poisoning, Release clears the message's bytes.
func TestReleaseClears(t *testing.T) {
	defer Poison(Poison(false))
	enc := Encoder{Cluster: "prod"}
	d := leaseDeltas(t)[0].d
	l := lease(t, enc, &d)
	l.Release()
	if m := l.Message(); m.Encoded != nil || m.Data != nil {
		t.Error("a released message still has its bytes")
	}
}
