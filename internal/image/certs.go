package image

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundle returns Mozilla's CA roots as one PEM file, in the bundle's
// order. A root that NSS trusts only for certificates issued before a date
// is left out: a PEM file cannot carry that date, and trusting such a root
// without it would trust more than NSS does.
func caBundle() (pemFile []byte, roots int) {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		roots++
	}
	return b.Bytes(), roots
}
