package tlstest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
)

// The client config completes a handshake with the server config over a
// real connection; a client without the client certificate, or trusting
// another CA, is refused. The files hold what the configs hold.
func TestPKI(t *testing.T) {
	p := NewPKI(t)
	other := NewPKI(t)
	noCert := p.Client.Clone()
	noCert.Certificates = nil
	for _, tt := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"client certificate", p.Client, true},
		{"no client certificate", noCert, false},
		{"another CA", other.Client, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := handshake(t, p.Server, tt.client); (err == nil) != tt.ok {
				t.Errorf("handshake: %v, want success %v", err, tt.ok)
			}
		})
	}

	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s holds no certificate", p.CAFile)
	}
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatalf("client files: %v", err)
	}
	fromFiles := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}
	if err := handshake(t, p.Server, fromFiles); err != nil {
		t.Errorf("handshake with the files' certificates: %v", err)
	}
	if b, _ := pem.Decode(ca); b == nil || b.Type != "CERTIFICATE" {
		t.Errorf("%s is not a PEM certificate", p.CAFile)
	}
}

// handshake connects a client with cfg to a server with srv on localhost
// and returns the client's handshake error, or the server's.
func handshake(t *testing.T, srv, cfg *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		served <- c.(*tls.Conn).Handshake()
	}()
	cfg = cfg.Clone()
	cfg.ServerName = "localhost"
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, cfg)
	defer c.Close()
	err = c.Handshake()
	if err == nil {
		// TLS 1.3 reports a refused client certificate on the first read.
		_, err = c.Read(make([]byte, 1))
		if serr := <-served; serr != nil {
			return serr
		}
		if err != nil && err.Error() == "EOF" {
			err = nil
		}
	}
	return err
}
