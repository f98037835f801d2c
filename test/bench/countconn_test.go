package bench

import (
	"context"
	"net"
	"sync/atomic"
)

// byteCount counts the bytes that cross TCP connections one way: what a
// server writes to its clients (countingListener), or what a client reads
// from its server (countingDialer). TLS records count whole, as they
// cross the wire.
type byteCount struct{ n atomic.Int64 }

// Load is the bytes counted so far.
func (c *byteCount) Load() int64 { return c.n.Load() }

// listen is a net.Listen whose connections count the bytes written to
// them, for a server that takes a listen function (kfake.ListenFn).
func (c *byteCount) listen(network, address string) (net.Listener, error) {
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return countingListener{Listener: l, c: c}, nil
}

// dial is a dialer whose connections count the bytes read from them, for a
// client that takes a dial function (rest.Config.Dial).
func (c *byteCount) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return readCounter{Conn: conn, c: c}, nil
}

type countingListener struct {
	net.Listener
	c *byteCount
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return writeCounter{Conn: conn, c: l.c}, nil
}

// writeCounter counts what is written to its connection.
type writeCounter struct {
	net.Conn
	c *byteCount
}

func (w writeCounter) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	w.c.n.Add(int64(n))
	return n, err
}

// readCounter counts what is read from its connection.
type readCounter struct {
	net.Conn
	c *byteCount
}

func (r readCounter) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.c.n.Add(int64(n))
	return n, err
}
