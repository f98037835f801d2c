package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	apiServerCertDir = "apiserver-certs"
	// The API server writes its self-signed serving certificate, followed by
	// the CA certificate that signed it, to this file in --cert-dir.
	apiServerCertFile = "apiserver.crt"
)

// startAPIServer starts kube-apiserver against the running etcd on a free
// port and waits until it is ready.
func (c *ControlPlane) startAPIServer(ctx context.Context, sec secrets, serviceAccounts bool, extraArgs []string) error {
	ctx, cancel := context.WithTimeout(ctx, apiServerStartTimeout)
	defer cancel()
	p, err := startWithRetry(ctx, c.apiServerLog, func(ctx context.Context) (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		args := append(apiServerArgs(c.dir, c.etcdURL, ports[0], sec, serviceAccounts), extraArgs...)
		p, caPEM, err := c.runAPIServer(ctx, args, ports[0])
		if err != nil {
			return nil, err
		}
		c.apiServerArgs, c.apiServerPort, c.caData = args, ports[0], caPEM
		c.apiServerURL = "https://" + loopbackAddr(ports[0])
		return p, nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.apiServer = p
	c.mu.Unlock()
	return nil
}

// restartAPIServerLocked starts kube-apiserver again with the arguments
// of the first start, so on the same port, certificates and token.
func (c *ControlPlane) restartAPIServerLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiServerStartTimeout)
	defer cancel()
	p, err := startWithRetry(ctx, c.apiServerLog, func(ctx context.Context) (*process, error) {
		// The certificate files are reused, so the CA stays the same.
		p, _, err := c.runAPIServer(ctx, c.apiServerArgs, c.apiServerPort)
		return p, err
	})
	if err != nil {
		return err
	}
	c.apiServer = p
	return nil
}

// apiServerArgs are the flags for a single-node API server that listens on
// 127.0.0.1 only and trusts the admin token.
func apiServerArgs(dir, etcdURL string, port int, sec secrets, serviceAccounts bool) []string {
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		// Without this, a loopback bind address makes the API server
		// advertise the host's default-route address, and fail to start on
		// a host that has no default route.
		"--advertise-address=127.0.0.1",
		// ...and the "kubernetes" Endpoints may not hold a loopback
		// address, so do not maintain them.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, apiServerCertDir),
		"--token-auth-file=" + sec.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + sec.serviceAcctKey,
		"--service-account-signing-key-file=" + sec.serviceAcctKey,
		"--service-cluster-ip-range=10.0.0.0/24",
	}
	if !serviceAccounts {
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	return args
}

// runAPIServer starts one kube-apiserver process and waits for /readyz. On
// success it also returns the PEM to trust for the serving certificate.
func (c *ControlPlane) runAPIServer(ctx context.Context, args []string, port int) (*process, []byte, error) {
	p, err := startProcess("kube-apiserver", c.apiServerBin, args, os.Environ(), c.apiServerLog.writer())
	if err != nil {
		return nil, nil, err
	}
	baseURL := "https://" + loopbackAddr(port)
	var caPEM []byte
	err = waitServing(ctx, p, func(ctx context.Context) error {
		var err error
		caPEM, err = apiServerReady(ctx, baseURL, filepath.Join(c.dir, apiServerCertDir, apiServerCertFile), c.token)
		return err
	})
	if err != nil {
		p.stop(stopGracePeriod)
		return nil, nil, fmt.Errorf("controlplane: kube-apiserver at %s did not become ready: %w%s", baseURL, err, c.apiServerLog.errorTail())
	}
	return p, caPEM, nil
}

// apiServerReady reads the generated certificate file and calls /readyz
// with the admin token, verifying TLS against it. It returns the PEM to
// use as CA data.
func apiServerReady(ctx context.Context, baseURL, certFile, token string) ([]byte, error) {
	caPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate not written yet: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("serving certificate not fully written yet")
	}
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
		Timeout: 5 * time.Second,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/readyz", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8192))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/readyz: %s: %s", resp.Status, shortBody(body))
	}
	return caPEM, nil
}

func loopbackAddr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// shortBody trims a /readyz failure response, which lists the failing
// checks, to its end.
func shortBody(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = "..." + s[len(s)-300:]
	}
	return s
}
