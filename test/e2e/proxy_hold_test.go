package e2e

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// hold makes the proxy stop forwarding, as a network path that silently
// drops everything: open connections stay open but carry nothing, either
// way, and new ones are accepted and then carry nothing. No side sees an
// error. release forwards again, what was held included.
func (p *cutProxy) hold() {
	ch := make(chan struct{})
	p.held.CompareAndSwap(nil, &ch)
}

// holdRequests is hold in one direction: what clients send is held, what
// the target sends still goes through, as a server that stopped reading
// its connections: answers to what it had read still come.
func (p *cutProxy) holdRequests() {
	ch := make(chan struct{})
	p.heldRequests.CompareAndSwap(nil, &ch)
}

// release ends a hold.
func (p *cutProxy) release() {
	for _, held := range []*atomic.Pointer[chan struct{}]{&p.held, &p.heldRequests} {
		if ch := held.Swap(nil); ch != nil {
			close(*ch)
		}
	}
}

// holdingReader reads from a connection of the proxy, and waits while the
// proxy holds before it hands on what it read. request is true on a
// client's connection.
type holdingReader struct {
	r       io.Reader
	p       *cutProxy
	request bool
}

func (h holdingReader) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	if ch := h.p.held.Load(); ch != nil {
		<-*ch
	}
	if ch := h.p.heldRequests.Load(); ch != nil && h.request {
		<-*ch
	}
	return n, err
}

// While held, the proxy forwards nothing on an open connection or a new
// one, and closes neither; once released, both carry what was held.
func TestCutProxyHold(t *testing.T) {
	px := startCutProxy(t, startEcho(t))
	open, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	px.hold()
	fresh, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatalf("a new connection during the hold: %v", err)
	}
	defer fresh.Close()
	for _, c := range []net.Conn{open, fresh} {
		if _, err := io.WriteString(c, "held"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := c.Read(make([]byte, 4)); n != 0 || !isTimeout(err) {
			t.Fatalf("read during the hold: %d bytes, %v; want nothing until the deadline", n, err)
		}
	}

	px.release()
	for _, c := range []net.Conn{open, fresh} {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
			t.Fatalf("after release: %q, %v; want what was held", buf, err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
