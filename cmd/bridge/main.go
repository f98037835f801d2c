// Command bridge watches Kubernetes objects and publishes every change to a
// message bus. It is configured only through environment variables; run
// `bridge --help` for the list.
//
// Exit codes:
//
//   - 0 after a clean shutdown, hard stops included.
//   - 1 on a runtime failure, and after a panic, which is logged with its
//     stack.
//   - 2 when the configuration is invalid (every problem is reported, by
//     variable name). A fatal error of the Go runtime (out of memory, a
//     concurrent map write) also exits with 2: no code can intercept it.
//   - 131 after SIGQUIT.
//
// Signals:
//
//   - SIGTERM, SIGINT and SIGHUP stop the bridge gracefully: it stops
//     watching, publishes what it holds, flushes its checkpoint, closes
//     its connections and exits, all within BRIDGE_SHUTDOWN_TIMEOUT of the
//     signal (see package shutdown for how the stages share it).
//   - A second one of them stops it at once: what it has not published is
//     abandoned, and the number is logged. It was never checkpointed, so
//     the next start publishes it; nothing is lost. The checkpoint is
//     still flushed.
//   - SIGQUIT writes the stack of every goroutine to stderr and exits with
//     131 at once, without a flush: as after a crash, the next start
//     publishes again what was published since the last checkpoint flush.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/crash"
	"github.com/kubebus/bridge/internal/httpserver"
	"github.com/kubebus/bridge/internal/leader"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/internal/shutdown"
	"github.com/kubebus/bridge/internal/version"
	"github.com/kubebus/bridge/source"
)

func main() {
	dumpOnQuit(os.Stderr)
	// Until the configuration names the log format, a panic is logged as
	// text.
	crash.Install(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	defer utilruntime.HandleCrash()
	os.Exit(run(os.Args[1:], os.Environ(), os.Stderr))
}

func run(args []string, environ []string, stderr io.Writer) int {
	for _, a := range args {
		switch a {
		case "-version", "--version", "version":
			fmt.Fprintln(stderr, "bridge", version.Read())
			return 0
		case "-h", "-help", "--help", "help":
			fmt.Fprintln(stderr, "bridge publishes every change to Kubernetes objects to a message bus.")
			fmt.Fprintln(stderr, "It is configured only through environment variables:")
			fmt.Fprintln(stderr)
			_ = config.Help(stderr)
			return 0
		default:
			fmt.Fprintf(stderr, "bridge: unknown argument %q; configure with environment variables (see bridge --help)\n", a)
			return 2
		}
	}

	cfg, err := config.Load(environ)
	if err != nil {
		fmt.Fprintf(stderr, "bridge: invalid configuration:\n%v\n", indent(err))
		return 2
	}
	log := newLogger(cfg, stderr)
	crash.Install(log)
	klog.SetSlogLogger(log.With("component", "client-go"))

	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		log.Error("no Kubernetes client configuration", "err", err)
		return 2
	}
	rc.UserAgent = "kubebus-bridge"
	limitRate(rc, cfg.KubeQPS, cfg.KubeBurst)

	ctx, hard, release := onStopSignals(log)
	defer release()
	// One budget from the stop signal to the exit, which the bridge's
	// drain, flush and closes, the lease's release and the HTTP server's
	// shutdown share (see package shutdown).
	budget := shutdown.Watch(ctx, cfg.ShutdownTimeout)

	m := metrics.New()
	b := bridge.New(cfg, rc, log, bridge.WithMetrics(m), bridge.WithHardStop(hard), bridge.WithBudget(budget))
	var role leader.Role
	ready := b.Readiness
	if cfg.LeaderElection {
		ready = role.Readiness(b.Readiness)
	}

	var wg sync.WaitGroup
	srvCtx, stopServer := context.WithCancel(context.Background())
	// The HTTP server shuts down last, until the budget's end at the
	// latest: a request still in flight then is cut by the exit.
	defer func() { stopServer(); budget.Wait(shutdown.Exit, wg.Wait) }()
	if cfg.MetricsAddr != "" {
		srv, err := httpserver.New(cfg.MetricsAddr, m.Registry, ready, log)
		if err != nil {
			log.Error("invalid configuration", "variable", "BRIDGE_METRICS_ADDR", "err", err)
			return 2
		}
		if cfg.Pprof {
			srv.ServeProfiles()
		}
		log.Info("serving /metrics, /healthz and /readyz", "addr", srv.Addr(), "pprof", cfg.Pprof)
		wg.Go(func() {
			defer utilruntime.HandleCrash()
			if err := srv.Run(srvCtx); err != nil {
				log.Error("http server failed", "err", err)
			}
		})
	}

	if cfg.LeaderElection {
		le, err := leaderConfig(cfg)
		if err != nil {
			log.Error("invalid configuration", "err", err)
			return 2
		}
		kc, err := kubernetes.NewForConfig(rc)
		if err != nil {
			log.Error("kubernetes client", "err", err)
			return 1
		}
		// The lease is released after the bridge has stopped, within what
		// is left of the budget; one not released by its end expires by
		// itself after BRIDGE_LEADER_ELECTION_LEASE_DURATION.
		worked := make(chan error, 1)
		err = untilExit(ctx, budget, func() error {
			return leader.Run(ctx, kc, le, log.With("component", "leader"), func(ctx context.Context) error {
				err := b.Run(ctx)
				worked <- err
				return err
			}, func(l bool) {
				role.Set(l)
				m.Leader(l)
			})
		})
		if errors.Is(err, errStopOverrun) {
			select {
			case err = <-worked:
				// The bridge stopped; the lease's release did not end.
				log.Warn("the lease was not released within BRIDGE_SHUTDOWN_TIMEOUT; exiting: it expires by itself", "component", "leader")
			default:
			}
		}
		return exitCode(log, err)
	}
	m.Leader(true)
	return exitCode(log, untilExit(ctx, budget, func() error { return b.Run(ctx) }))
}

// errStopOverrun: the stop did not end within BRIDGE_SHUTDOWN_TIMEOUT.
var errStopOverrun = errors.New("the stop did not end within BRIDGE_SHUTDOWN_TIMEOUT; exiting with what was left undone")

// untilExit returns run's error, or errStopOverrun at the budget's end
// once ctx has ended (the stop began) and run has not returned:
// the process then exits, leaving run behind, rather than outlive its
// grace period.
func untilExit(ctx context.Context, budget *shutdown.Budget, run func() error) error {
	done := make(chan error, 1)
	go func() {
		defer utilruntime.HandleCrash()
		done <- run()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// The bridge's own stages end by the exit's deadline; the rest of
	// the budget is the process's to exit in.
	t := time.NewTimer(time.Until(budget.Began().Add(budget.Total())))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errStopOverrun
	}
}

func exitCode(log *slog.Logger, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, source.ErrUnknownResource) || errors.Is(err, source.ErrBadSelector):
		log.Error("invalid configuration", "err", err)
		return 2
	case errors.Is(err, leader.ErrLostLeadership):
		log.Error("lost the lease; exiting so that this replica restarts as a standby", "err", err)
		return 1
	default:
		log.Error("bridge failed", "err", err)
		return 1
	}
}

// leaderConfig fills in the Lease's namespace and this replica's identity
// where the configuration leaves them to the pod.
func leaderConfig(cfg *config.Config) (leader.Config, error) {
	lc := leader.Config{
		Namespace:     cfg.LeaderElectionNamespace,
		Name:          cfg.LeaderElectionName,
		Identity:      cfg.LeaderElectionIdentity,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
	}
	if lc.Namespace == "" {
		ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return lc, &envvar.Error{Var: "BRIDGE_LEADER_ELECTION_NAMESPACE", Err: fmt.Errorf("not set, and not running in a pod: %w", err)}
		}
		lc.Namespace = strings.TrimSpace(string(ns))
	}
	if lc.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return lc, &envvar.Error{Var: "BRIDGE_LEADER_ELECTION_IDENTITY", Err: fmt.Errorf("not set, and no host name: %w", err)}
		}
		lc.Identity = host
	}
	return lc, nil
}

// limitRate gives rc the bridge's own rate limit (see
// config.Config.KubeQPS): one token bucket, which every client made from
// rc, or from a copy of it, shares (discovery, the source's, the
// follower's, the leader election's), so that every request counts
// against the one limit. The API server's refusals beyond its own limit
// (429) are retried, never fatal.
func limitRate(rc *rest.Config, qps float32, burst int) {
	rc.QPS, rc.Burst = qps, burst
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
}

// restConfig uses kubeconfig (KUBECONFIG, from the environment run was
// given, a list of files as kubectl takes it) when set; otherwise the
// in-cluster service account, and failing that ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	// The default rules read KUBECONFIG from the process's environment.
	rules.Precedence = []string{clientcmd.RecommendedHomeFile}
	if kubeconfig != "" {
		rules.Precedence = filepath.SplitList(kubeconfig)
	} else if rc, err := rest.InClusterConfig(); err == nil {
		return rc, nil
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	level, _ := cfg.Level() // validated by config.Load
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func indent(err error) string {
	var out []byte
	out = append(out, "  "...)
	for _, c := range []byte(err.Error()) {
		out = append(out, c)
		if c == '\n' {
			out = append(out, "  "...)
		}
	}
	return string(out)
}
