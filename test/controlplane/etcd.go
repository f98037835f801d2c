package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const etcdName = "controlplane"

// startEtcd starts a single-member etcd on two free ports and waits until
// its /health endpoint reports healthy.
func (c *ControlPlane) startEtcd(ctx context.Context, bin string, extraArgs []string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdStartTimeout)
	defer cancel()
	dataDir := filepath.Join(c.dir, "etcd-data")
	p, err := startWithRetry(ctx, c.etcdLog, func(ctx context.Context) (*process, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		// A failed attempt may have initialised the data directory with
		// the old peer URL.
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("controlplane: clearing etcd data directory: %w", err)
		}
		args := append([]string{
			"--name=" + etcdName,
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=" + etcdName + "=" + peerURL,
			"--initial-cluster-state=new",
			"--log-level=warn",
			// Throw-away data: skipping fsync makes writes much faster.
			"--unsafe-no-fsync",
		}, extraArgs...)
		p, err := startProcess("etcd", bin, args, etcdEnv(), c.etcdLog.writer())
		if err != nil {
			return nil, err
		}
		if err := waitServing(ctx, p, func(ctx context.Context) error { return etcdHealthy(ctx, clientURL) }); err != nil {
			p.stop(stopGracePeriod)
			return nil, fmt.Errorf("controlplane: etcd at %s did not become healthy: %w%s", clientURL, err, c.etcdLog.errorTail())
		}
		c.etcdURL = clientURL
		return p, nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcd = p
	c.mu.Unlock()
	return nil
}

// etcdEnv is the environment without ETCD_* variables, which etcd would
// read as configuration.
func etcdEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// etcdHealthy asks etcd's /health endpoint, which answers 200 and
// {"health":"true"} once the member has a leader and serves requests.
func etcdHealthy(ctx context.Context, clientURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Health != "true" {
		return fmt.Errorf("/health: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
