package envvar

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// TLSFiles are the PEM files of a TLS client. A configuration holds it
// with an envPrefix tag, so that its variables are <prefix>TLS_CA_FILE,
// <prefix>TLS_CERT_FILE and <prefix>TLS_KEY_FILE.
type TLSFiles struct {
	CAFile   string `env:"TLS_CA_FILE" help:"PEM file of the CAs that sign the servers' certificates; the system's CAs when unset. Setting it turns TLS on"`
	CertFile string `env:"TLS_CERT_FILE" help:"PEM client certificate, for servers that require one; its key goes in the ..._TLS_KEY_FILE variable beside it"`
	KeyFile  string `env:"TLS_KEY_FILE" help:"PEM private key of the client certificate"`
}

// Set reports whether any file is named.
func (f TLSFiles) Set() bool { return f.CAFile != "" || f.CertFile != "" || f.KeyFile != "" }

// Config reads the files, once, into a TLS client configuration (TLS 1.2
// at least) with serverName. Every problem is an *Error that names its
// variable, prefix (such as "BRIDGE_KAFKA_") included.
func (f TLSFiles) Config(prefix, serverName string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	var p Problems
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			p.Add(prefix+"TLS_CA_FILE", "%w", err)
		} else {
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				p.Add(prefix+"TLS_CA_FILE", "%s holds no PEM certificate", f.CAFile)
			}
		}
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			p.Add(prefix+"TLS_CERT_FILE", "with %sTLS_KEY_FILE: %w", prefix, err)
		} else {
			tc.Certificates = []tls.Certificate{cert}
		}
	case f.CertFile != "":
		p.Add(prefix+"TLS_KEY_FILE", "required with %sTLS_CERT_FILE", prefix)
	case f.KeyFile != "":
		p.Add(prefix+"TLS_CERT_FILE", "required with %sTLS_KEY_FILE", prefix)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return tc, nil
}
