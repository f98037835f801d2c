// Command replica-controller is a controller-runtime controller that reads
// from the bus, through the replica, and writes to the cluster: for every
// ConfigMap labelled kubebus.io/example=mirror it keeps a ConfigMap
// <name>-seen in the same namespace, whose data key resourceVersion is the
// source's resourceVersion on the cluster's API server. Its informers, and
// the reads of Reconcile, cost the cluster's API server nothing; only the
// writes reach it. See package mirror for how one Manager reads from one
// server and writes to another.
//
//	go run ./examples/replica-controller \
//	    -replica-kubeconfig replica.kubeconfig -replica-context prod \
//	    -kubeconfig ~/.kube/config
//
// -replica-kubeconfig names a kubeconfig whose context (-replica-context,
// or its current one) reaches the replica at https://<replica>/clusters/<name>
// with a user the replica's access rules let list and watch configmaps on
// that cluster. -kubeconfig (or $KUBECONFIG, or the pod's ServiceAccount
// in a cluster) reaches the cluster's own API server, where the
// controller needs get, create and patch on configmaps.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubebus/bridge/examples/replica-controller/mirror"
)

func main() {
	replicaKubeconfig := flag.String("replica-kubeconfig", os.Getenv("REPLICA_KUBECONFIG"), "kubeconfig that reaches the replica's /clusters/<name> (env REPLICA_KUBECONFIG); required")
	replicaContext := flag.String("replica-context", "", "its context; the current one when empty")
	metricsAddr := flag.String("metrics-bind-address", "0", "the controller's own metrics address; 0 turns them off")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*replicaKubeconfig, *replicaContext, *metricsAddr, log); err != nil {
		log.Error("replica-controller: stopped", "err", err)
		os.Exit(1)
	}
}

func run(replicaKubeconfig, replicaContext, metricsAddr string, log *slog.Logger) error {
	if replicaKubeconfig == "" {
		return fmt.Errorf("-replica-kubeconfig (or REPLICA_KUBECONFIG) is required")
	}
	replica, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: replicaKubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: replicaContext},
	).ClientConfig()
	if err != nil {
		return fmt.Errorf("replica kubeconfig %s: %w", replicaKubeconfig, err)
	}
	cluster, err := ctrlconfig.GetConfig()
	if err != nil {
		return fmt.Errorf("the cluster's API server: %w", err)
	}
	mgr, err := mirror.NewManager(replica, cluster, manager.Options{
		Logger:  logr.FromSlogHandler(log.Handler()),
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("replica-controller: starting", "replica", replica.Host, "cluster", cluster.Host)
	return mgr.Start(ctx)
}
