package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// secrets are the API server's credential files in the working directory.
type secrets struct {
	token          string // the admin user's bearer token
	tokenFile      string // --token-auth-file
	serviceAcctKey string // RSA private key: signs and verifies service-account tokens
}

// writeSecrets creates a random admin token and a service-account key.
func writeSecrets(dir string) (secrets, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return secrets{}, fmt.Errorf("controlplane: generating token: %w", err)
	}
	s := secrets{
		token:          hex.EncodeToString(raw),
		tokenFile:      filepath.Join(dir, "tokens.csv"),
		serviceAcctKey: filepath.Join(dir, "service-account.key"),
	}
	// token,user,uid,"group1,group2"
	line := s.token + ",admin,admin,system:masters\n"
	if err := os.WriteFile(s.tokenFile, []byte(line), 0o600); err != nil {
		return secrets{}, fmt.Errorf("controlplane: writing token file: %w", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return secrets{}, fmt.Errorf("controlplane: generating service-account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return secrets{}, fmt.Errorf("controlplane: encoding service-account key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(s.serviceAcctKey, keyPEM, 0o600); err != nil {
		return secrets{}, fmt.Errorf("controlplane: writing service-account key: %w", err)
	}
	return s, nil
}
