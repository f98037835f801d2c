// Package tlstest makes, for one test, a throwaway certificate authority with
// a server certificate for 127.0.0.1 and localhost and a client
// certificate, all in process: the TLS configs a test server (a NATS
// server, a Kafka cluster) and its client use, and the PEM files a bridge
// reads. Nothing it makes is valid for more than a day.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority with a server certificate for
// 127.0.0.1 and localhost and a client certificate.
type PKI struct {
	// CAFile, CertFile and KeyFile are PEM files of the CA certificate and
	// of the client's certificate and key, for the bridge's TLS settings
	// (BRIDGE_KAFKA_TLS_*, BRIDGE_NATS_TLS_*).
	CAFile, CertFile, KeyFile string
	// Server is a server's TLS config: it presents the server certificate
	// and requires a client certificate the CA signed.
	Server *tls.Config
	// Client is a client's TLS config: it trusts the CA and presents the
	// client certificate.
	Client *tls.Config
}

// NewPKI makes a PKI whose files live in a directory of t's.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := issue(t, nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "pki test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	})
	srvKey, _, srvDER := issue(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	cliKey, _, cliDER := issue(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "bridge"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})

	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	p := &PKI{
		CAFile:   writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER),
		CertFile: writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER),
		KeyFile:  writePEM(t, dir, "client-key.pem", "PRIVATE KEY", marshalKey(t, cliKey)),
		Server: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
		Client: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}},
			MinVersion:   tls.VersionTLS12,
		},
	}
	return p
}

var serial atomic.Int64

// issue makes a key and a certificate from tmpl, signed by parent (self
// signed when parent is nil).
func issue(t testing.TB, parentKey *ecdsa.PrivateKey, parent, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func marshalKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, dir, name, blockType string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
