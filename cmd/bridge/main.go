// Command bridge watches Kubernetes objects and publishes every change to a
// message bus. It is configured only through environment variables; run
// `bridge --help` for the list.
//
// Exit codes: 0 after a clean shutdown, 1 on a runtime failure, 2 when the
// configuration is invalid (every problem is reported, by variable name).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/source"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stderr))
}

func run(args []string, environ []string, stderr io.Writer) int {
	for _, a := range args {
		switch a {
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
	klog.SetSlogLogger(log.With("component", "client-go"))

	rc, err := restConfig()
	if err != nil {
		log.Error("no Kubernetes client configuration", "err", err)
		return 2
	}
	rc.UserAgent = "kubebus-bridge"
	rc.QPS, rc.Burst = 50, 100

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	err = bridge.New(cfg, rc, log).Run(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, source.ErrUnknownResource) || errors.Is(err, source.ErrBadSelector):
		log.Error("invalid configuration", "err", err)
		return 2
	default:
		log.Error("bridge failed", "err", err)
		return 1
	}
}

// restConfig uses KUBECONFIG when set; otherwise the in-cluster service
// account, and failing that ~/.kube/config.
func restConfig() (*rest.Config, error) {
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
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
