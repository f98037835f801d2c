// Package mirror is the controller of the replica-controller example: it
// reconciles ConfigMaps read from the bus, through the replica, and
// writes what it saw to the cluster's own API server.
//
// For every ConfigMap labelled kubebus.io/example=mirror, it keeps a
// ConfigMap <name>-seen in the same namespace whose data key
// resourceVersion is the source's resourceVersion on the cluster's API
// server (the replica serves it in the annotation kubebus.io/resource-version;
// an object's own resourceVersion on the replica is a bus position).
//
// # Two servers, one Manager
//
// The Manager is built for the cluster's API server, and only its cache is
// pointed at the replica, with manager.Options.NewCache: controller-runtime
// 0.25 builds the Manager's client over that cache (reads from it, writes
// to the Manager's config), so reads come from the bus and writes go to
// the cluster, with one Manager and no second cluster.Cluster to start and
// wait for. Two things must not leak from the Manager into the cache, and
// NewManager resets them: the HTTP client (the cluster's credentials and
// CA) and the REST mapper (the cluster's discovery); the cache builds its
// own from the replica's config.
//
// The cache holds only the labelled ConfigMaps (a label selector the
// replica applies), so the controller never reads a ConfigMap it does not
// own, and it writes with server-side apply, which needs no read of the
// <name>-seen ConfigMap: the replica may show it late, the API server
// never does.
package mirror

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubebus/bridge/consumer"
)

const (
	// Label and LabelValue select the ConfigMaps to mirror.
	Label      = "kubebus.io/example"
	LabelValue = "mirror"
	// SeenSuffix names the ConfigMap written for each source.
	SeenSuffix = "-seen"
	// SeenKey is the data key of the source's API resourceVersion.
	SeenKey = "resourceVersion"
	// FieldOwner is the server-side apply field manager of the writes.
	FieldOwner = "kubebus-replica-controller"
)

// NewManager returns a Manager whose cache reads the labelled ConfigMaps
// from the replica (replica: a config for https://<replica>/clusters/<name>)
// and whose client writes to the cluster's API server (cluster), with the
// mirror controller added. opts are the Manager's other options (metrics,
// health probes, logger, leader election); its cache, client and scheme
// options are the controller's own.
func NewManager(replica, cluster *rest.Config, opts manager.Options) (manager.Manager, error) {
	opts.Cache = cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{Label: LabelValue})},
	}}
	opts.NewCache = func(_ *rest.Config, o cache.Options) (cache.Cache, error) {
		// The cluster's HTTP client and discovery are not the replica's.
		o.HTTPClient, o.Mapper = nil, nil
		return cache.New(replica, o)
	}
	mgr, err := manager.New(cluster, opts)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	err = builder.ControllerManagedBy(mgr).
		Named("mirror").
		For(&corev1.ConfigMap{}).
		Complete(&Reconciler{Client: mgr.GetClient()})
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return mgr, nil
}

// Reconciler writes <name>-seen for a labelled ConfigMap. Its Client reads
// from the replica's cache and writes to the cluster. Reconcile may be
// called concurrently for different ConfigMaps.
type Reconciler struct {
	Client client.Client
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Reconcile applies <name>-seen with the source's API resourceVersion. A
// source that is gone, or no longer labelled, is left alone, and so is
// its <name>-seen.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var src corev1.ConfigMap
	if err := r.Client.Get(ctx, req.NamespacedName, &src); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if src.Labels[Label] != LabelValue {
		return reconcile.Result{}, nil
	}
	rv := src.Annotations[consumer.AnnotationResourceVersion]
	if rv == "" {
		// Not an object served by the replica: nothing to record.
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("mirror: %s has no %s annotation; is the cache reading the replica?", req, consumer.AnnotationResourceVersion))
	}
	name := src.Name + SeenSuffix
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("mirror: %s: cannot name its copy %q: %v", req, name, errs))
	}
	seen := corev1ac.ConfigMap(name, src.Namespace).
		WithData(map[string]string{SeenKey: rv, "source": src.Name})
	if err := r.Client.Apply(ctx, seen, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			// The namespace is gone from the cluster; the bus will say so.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("mirror: apply %s/%s: %w", src.Namespace, name, err)
	}
	return reconcile.Result{}, nil
}
