// Package controlplane starts a real etcd and a real kube-apiserver for the
// bridge's end-to-end tests and its demo.
//
// Start runs both binaries as child processes on free 127.0.0.1 ports, with
// their data, certificates, secrets, logs and a kubeconfig in one working
// directory. It returns only once etcd is healthy and the API server answers
// /readyz with 200 for the admin bearer token, so callers never race the
// start-up.
//
// Guarantees:
//   - Nothing listens on anything but the loopback interface.
//   - The admin user is authenticated by a random bearer token and is in
//     system:masters, so it may do anything (RBAC authorization is on).
//   - Stop terminates both processes (SIGTERM, then SIGKILL to their process
//     groups), reaps them and removes the working directory if Start created
//     it. Stop is idempotent.
//   - On Linux the children also die if the process that started them dies
//     without calling Stop (crash, os.Exit, SIGKILL, test timeout): they are
//     started with PR_SET_PDEATHSIG=SIGKILL from an OS thread that stays
//     locked for the child's whole life, so the signal cannot fire early
//     when the Go runtime retires a thread. Other Unix systems get the
//     process groups but no parent-death signal.
//
// The context given to Start and RestartAPIServer bounds start-up only; the
// processes live until Stop.
package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Start-up and shutdown budgets. The context passed to Start may shorten them.
const (
	etcdStartTimeout      = 30 * time.Second
	apiServerStartTimeout = 60 * time.Second
	stopGracePeriod       = 5 * time.Second
	startAttempts         = 3
)

// Options configures Start. The zero value is the normal choice.
type Options struct {
	// BinDir holds the kube-apiserver and etcd binaries. Default:
	// $BRIDGE_TEST_BIN_DIR, else <module root>/.bin where the module root is
	// the nearest directory at or above the working directory whose go.mod
	// declares module github.com/kubebus/bridge.
	BinDir string
	// Dir is the working directory for etcd data, certificates, secrets,
	// logs and the kubeconfig. It must be empty or not exist; it is kept by
	// Stop. Default: a new temporary directory that Stop removes.
	Dir string
	// Log receives both processes' output, each line prefixed with the
	// process name. Write errors are ignored. Default: the files etcd.log and
	// kube-apiserver.log in Dir.
	Log io.Writer
	// ExtraEtcdArgs and ExtraAPIServerArgs are appended to the flags the
	// helper passes (a repeated flag overrides an earlier one), e.g.
	// "--watch-cache=false" for the API server.
	ExtraEtcdArgs      []string
	ExtraAPIServerArgs []string
	// ServiceAccountAdmission runs the API server's ServiceAccount
	// admission plugin, which gives each new pod the volume of its
	// ServiceAccount's token and refuses a pod whose ServiceAccount does
	// not exist. Off by default: no controller here creates the default
	// ServiceAccount that pods of other tests would need.
	ServiceAccountAdmission bool
}

// ControlPlane is a running etcd plus kube-apiserver. Its methods are safe
// for concurrent use.
type ControlPlane struct {
	dir            string
	ownDir         bool
	etcdURL        string
	apiServerURL   string
	token          string
	caData         []byte
	kubeconfigPath string
	apiServerBin   string
	apiServerArgs  []string
	apiServerPort  int
	etcdLog        *processLog
	apiServerLog   *processLog

	mu        sync.Mutex // guards the fields below
	etcd      *process
	apiServer *process
	stopped   bool
	stopErr   error
}

// Start starts etcd and kube-apiserver and waits until both serve. On error
// nothing is left running and a directory Start created is removed.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	etcdBin, err := findBinary(binDir, "etcd")
	if err != nil {
		return nil, err
	}
	apiServerBin, err := findBinary(binDir, "kube-apiserver")
	if err != nil {
		return nil, err
	}

	c := &ControlPlane{apiServerBin: apiServerBin}
	if err := c.makeDir(opts.Dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	var shared *syncWriter
	if opts.Log != nil {
		shared = &syncWriter{w: opts.Log}
	}
	if c.etcdLog, err = newProcessLog("etcd", c.dir, shared); err != nil {
		return nil, err
	}
	if c.apiServerLog, err = newProcessLog("kube-apiserver", c.dir, shared); err != nil {
		return nil, err
	}
	sec, err := writeSecrets(c.dir)
	if err != nil {
		return nil, err
	}
	c.token = sec.token

	if err := c.startEtcd(ctx, etcdBin, opts.ExtraEtcdArgs); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, sec, opts.ServiceAccountAdmission, opts.ExtraAPIServerArgs); err != nil {
		return nil, err
	}
	if c.kubeconfigPath, err = writeKubeconfig(c.dir, c.apiServerURL, c.caData, c.token); err != nil {
		return nil, err
	}
	return c, nil
}

// makeDir sets up the working directory: a fresh temporary one, or the
// caller's, which must be empty so that no stale etcd data is picked up.
func (c *ControlPlane) makeDir(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "kubebus-controlplane-")
		if err != nil {
			return fmt.Errorf("controlplane: creating working directory: %w", err)
		}
		c.dir, c.ownDir = d, true
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("controlplane: working directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("controlplane: creating working directory: %w", err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return fmt.Errorf("controlplane: reading working directory: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("controlplane: working directory %s is not empty", abs)
	}
	c.dir = abs
	return nil
}

// RESTConfig returns a new client configuration for the admin user (bearer
// token, server certificate verified against the API server's self-signed
// CA) with QPS 100 and Burst 200. Callers may modify it.
func (c *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:        c.apiServerURL,
		BearerToken: c.token,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: bytes.Clone(c.caData),
		},
		QPS:   100,
		Burst: 200,
	}
}

// KubeconfigPath is a kubeconfig file in Dir with one cluster, user and
// context (the current one) named "controlplane"; the CA is embedded. It is
// usable with kubectl --kubeconfig or KUBECONFIG.
func (c *ControlPlane) KubeconfigPath() string { return c.kubeconfigPath }

// EtcdURL is etcd's client URL, e.g. http://127.0.0.1:40123. The API server
// keeps its objects under the key prefix /registry.
func (c *ControlPlane) EtcdURL() string { return c.etcdURL }

// APIServerURL is the API server's https URL.
func (c *ControlPlane) APIServerURL() string { return c.apiServerURL }

// Dir is the working directory (logs are there unless Options.Log was set).
func (c *ControlPlane) Dir() string { return c.dir }

// APIServerPID is the process id of the running kube-apiserver, for
// measuring what it costs (/proc/<pid>/stat, /proc/<pid>/status). It
// changes with RestartAPIServer; it is 0 after Stop.
func (c *ControlPlane) APIServerPID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.apiServer == nil {
		return 0
	}
	return c.apiServer.pid
}

// LogTails returns the last lines of etcd's and the API server's output, for
// diagnosing a failed test.
func (c *ControlPlane) LogTails() string {
	var b bytes.Buffer
	for _, l := range []*processLog{c.etcdLog, c.apiServerLog} {
		if l != nil {
			fmt.Fprintf(&b, "--- last lines of %s output ---\n%s", l.name, l.tail.lastLines(40))
		}
	}
	return b.String()
}

// RestartAPIServer stops kube-apiserver, keeping etcd and its data, starts
// it again with the same port, certificates and token, and waits until it is
// ready. Existing rest.Configs and the kubeconfig stay valid.
func (c *ControlPlane) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("controlplane: RestartAPIServer after Stop")
	}
	if c.apiServer != nil {
		c.apiServer.stop(stopGracePeriod)
		c.apiServer = nil
	}
	return c.restartAPIServerLocked(ctx)
}

// Stop terminates kube-apiserver and then etcd, waits for both to exit,
// closes the log files and removes the working directory if Start created
// it. Calling it again returns the first call's result.
func (c *ControlPlane) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true

	if c.apiServer != nil {
		c.apiServer.stop(stopGracePeriod)
	}
	if c.etcd != nil {
		c.etcd.stop(stopGracePeriod)
	}
	var errs []error
	for _, l := range []*processLog{c.apiServerLog, c.etcdLog} {
		if l != nil {
			errs = append(errs, l.close())
		}
	}
	if c.ownDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("controlplane: removing working directory: %w", err))
		}
	}
	c.stopErr = errors.Join(errs...)
	return c.stopErr
}
