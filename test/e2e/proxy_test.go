package e2e

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubebus/bridge/test/poll"
)

// cutProxy forwards TCP connections from a loopback address to a target,
// so that a test can take the target away from one client only: cut closes
// every forwarded connection, both ways, and refuses new ones, as a server
// that went off the network does; resume serves on the same address
// again. It does not look into what it forwards, so TLS goes through
// untouched.
type cutProxy struct {
	addr   string // where clients connect; the same across cuts
	target string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup

	accepted atomic.Int64 // connections forwarded so far

	// held, while set, stops forwarding without closing anything (see
	// hold); release closes it.
	held atomic.Pointer[chan struct{}]
	// heldRequests is held for what clients send only (holdRequests).
	heldRequests atomic.Pointer[chan struct{}]
}

// startCutProxy forwards a new loopback address to target until the test
// ends.
func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.cut()
		p.release()
		p.wg.Wait()
	})
	return p
}

// serve accepts on ln, with p.mu held or before p is shared.
func (p *cutProxy) serve(ln net.Listener) {
	p.ln = ln
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by cut
			}
			p.wg.Go(func() { p.forward(c) })
		}
	})
}

// forward copies between c and a new connection to the target until
// either side ends or the proxy is cut, then closes both.
func (p *cutProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	p.accepted.Add(1)

	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, holdingReader{src, p, src == c})
		done <- struct{}{}
	}
	go copyTo(up, c)
	go copyTo(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes the listener and every forwarded connection: the client's
// open connections break, and new ones are refused until resume.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
}

// resume serves on the proxy's address again. The port was free for a
// moment; if something else took it, the test cannot go on.
func (p *cutProxy) resume(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	var (
		ln  net.Listener
		err error
	)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		ln, err = net.Listen("tcp", p.addr)
		return err == nil, "listen again on " + p.addr + ": " + errString(err)
	})
	p.serve(ln)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// proxiedKubeconfig writes a copy of the control plane's kubeconfig whose
// server is addr, and returns its path. The API server's certificate is
// for 127.0.0.1, so a loopback proxy's address still verifies.
func proxiedKubeconfig(t *testing.T, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The proxy forwards both ways; a cut breaks open connections and refuses
// new ones; after resume, connections go through again on the same
// address.
func TestCutProxy(t *testing.T) {
	px := startCutProxy(t, startEcho(t))

	echo := func(c net.Conn, s string) (string, error) {
		if _, err := io.WriteString(c, s); err != nil {
			return "", err
		}
		buf := make([]byte, len(s))
		_, err := io.ReadFull(c, buf)
		return string(buf), err
	}
	open, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if got, err := echo(open, "before"); got != "before" || err != nil {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	px.cut()
	if n, err := open.Read(make([]byte, 1)); err == nil {
		t.Errorf("an open connection still reads after the cut (%d bytes)", n)
	}
	if c, err := net.Dial("tcp", px.addr); err == nil {
		c.Close()
		t.Error("a new connection was accepted during the cut")
	}

	px.resume(t)
	again, err := net.Dial("tcp", px.addr)
	if err != nil {
		t.Fatalf("after resume: %v", err)
	}
	defer again.Close()
	if got, err := echo(again, "after"); got != "after" || err != nil {
		t.Fatalf("through the proxy after resume: %q, %v", got, err)
	}
	if n := px.accepted.Load(); n != 2 {
		t.Errorf("%d connections forwarded, want 2", n)
	}
}

// startEcho starts a TCP server on loopback that writes back what each
// connection sends, and returns its address.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}
