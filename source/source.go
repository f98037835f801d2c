package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/checkpoint"
)

// ErrBadSelector is wrapped by Check's error when the API server rejects the
// label or field selector for a resource.
var ErrBadSelector = errors.New("selector not accepted by the API server")

// errNotWrapped is Check's error when the client's transport is not
// wrapped with WrapTransport.
var errNotWrapped = errors.New("source: the API client's transport is not wrapped with source.WrapTransport: " +
	"the source could not tell a dropped watch from one the API server ended")

// Options select what a Source watches and what its deltas carry.
type Options struct {
	Resources []Resource
	// Namespaces limits namespaced resources to these namespaces; empty
	// means all. Cluster-scoped resources are always watched whole.
	Namespaces    []string
	LabelSelector string
	FieldSelector string
	// KeepManagedFields keeps metadata.managedFields in objects of the
	// parsed path. By default it is dropped as objects arrive: it is
	// large, and consumers rarely want it. The raw path hands objects on
	// as sent, managedFields included, and leaves it to the event writer
	// to leave out (event.Encoder.KeepManagedFields).
	KeepManagedFields bool
	// Observer, when set, is told of relists, watch errors and syncs.
	Observer Observer
	// OldObject adds the previous state to Updated deltas. It costs memory:
	// the source then keeps every object's latest state, where otherwise it
	// keeps only its uid and resourceVersion.
	OldObject bool
	// Discovery, when set, is asked whether a resource the API server
	// does not find is still served at the version watched; Run stops
	// with a NotServedError when it is not (see served.go).
	Discovery discovery.DiscoveryInterfaceWithContext
	// StallTimeout is how long a watch may go without hearing from the API
	// server, or keep failing, before it is reported unhealthy (see
	// health.go); zero means DefaultStallTimeout.
	StallTimeout time.Duration
	// REST, when set, is the client of the raw path (NewRESTClient), on
	// the same rest.Config as New's client: the source then runs PathRaw,
	// unless OldObject is set, which needs the parsed path. Without it the
	// source runs PathParsed with New's client.
	REST rest.Interface
	// View, when set, makes the deltas those of a view of the objects (see
	// View): it filters and projects on the raw path only, since it reads
	// the API server's bytes. Positions in the checkpoint carry each object's
	// state in the view, so that a restart, or a new definition of the
	// view, publishes what changed in it.
	View View
	// Bus, when set, reads back what the bus holds (a state layout): the
	// bus is then the record of what was published, and the checkpoint a
	// cache of it. At start the source compares the checkpoint with it
	// before the first list, and the bus wins every difference, so that
	// the first list publishes exactly what the bus lacks, holds older or
	// holds of objects the cluster lacks, whatever became of the
	// checkpoint; Set.Reconcile compares it again while the source runs.
	Bus Bus
}

// Observer is told of events in the life of the informers, for metrics.
// Its methods must not block.
type Observer interface {
	Relisted(Resource)
	WatchError(Resource)
	Synced(Resource, bool)
	// Suppressed is told of each change the view (Options.View) kept
	// from being reported.
	Suppressed(Resource, Suppressed)
}

type noObserver struct{}

func (noObserver) Relisted(Resource)               {}
func (noObserver) WatchError(Resource)             {}
func (noObserver) Synced(Resource, bool)           {}
func (noObserver) Suppressed(Resource, Suppressed) {}

// Loader reads what was published before for one resource.
type Loader interface {
	Load(ctx context.Context, resource string) (checkpoint.Snapshot, error)
}

// Source runs one reflector per resource and namespace and hands their
// changes to a Handler as deltas.
type Source struct {
	client  dynamic.Interface
	opts    Options
	loader  Loader
	handler Handler
	log     *slog.Logger

	path    Path
	synced  chan struct{}
	relists atomic.Int64
	// health follows each reflector, by resource name and namespace.
	health map[watchKey]*health
	// throttle counts and logs the answers 429 (see throttle.go).
	throttle throttling
	// trackers are the resources' trackers, set once each delivered its
	// initial list, for Reconcile.
	trackers atomic.Pointer[[]*tracker]
}

// New returns a Source. Nothing is contacted until Run. client must be
// built from a rest.Config wrapped with WrapTransport.
func New(client dynamic.Interface, opts Options, loader Loader, h Handler, log *slog.Logger) *Source {
	if opts.Observer == nil {
		opts.Observer = noObserver{}
	}
	// One reflector per namespace: a namespace named twice would get two,
	// and every change in it twice.
	var namespaces []string
	for _, ns := range opts.Namespaces {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	opts.Namespaces = namespaces
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	path := PathParsed
	if opts.REST != nil && !opts.OldObject {
		path = PathRaw
	}
	s := &Source{
		client:  client,
		opts:    opts,
		path:    path,
		loader:  loader,
		handler: h,
		log:     log,
		synced:  make(chan struct{}),
		health:  map[watchKey]*health{},
	}
	now := time.Now()
	for _, res := range opts.Resources {
		for _, ns := range s.namespacesFor(res) {
			s.health[watchKey{res.Name(), ns}] = newHealth(res, ns, opts.StallTimeout, now, func(err error) {
				s.opts.Observer.WatchError(res)
				s.log.Warn("call cut: the API server sent nothing on it; retrying", "resource", res.Name(), "namespace", ns, "err", err)
			})
		}
	}
	return s
}

// Path is how the source hands objects on: PathRaw or PathParsed.
func (s *Source) Path() Path { return s.path }

// Synced is closed once every informer has delivered its initial list and
// the deletes found by the initial diff have been handed to the Handler.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// Relists reports how many times an informer listed its resource again
// after its first list, because its watch could not resume (for example,
// 410 Gone after etcd compaction).
func (s *Source) Relists() int64 { return s.relists.Load() }

// Check lists each resource once, with the configured selectors, in each
// configured namespace, so that a selector the API server rejects, or
// missing permissions, fail at start-up rather than in a retry loop. It
// also fails if the client's transport is not wrapped with WrapTransport.
// A call the API server throttles (429) is retried with backoff until
// ctx ends: a throttled start is slow, not failed.
func (s *Source) Check(ctx context.Context) error {
	var errs []error
	for _, res := range s.opts.Resources {
		for _, ns := range s.namespacesFor(res) {
			switch err := s.retryThrottled(ctx, res, ns, func() error { return s.check(ctx, res, ns) }); {
			case errors.Is(err, errNotWrapped):
				return err
			case err != nil:
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// check lists res in ns once, and opens a watch from there.
func (s *Source) check(ctx context.Context, res Resource, ns string) error {
	st := s.newStream(res, VerbList, ns)
	client := s.apiClient(res, ns)
	list, err := client.List(withStream(ctx, st), s.listOptions(1))
	switch {
	case err == nil && st.attempts.Load() == 0:
		return errNotWrapped
	case err == nil:
		return s.checkWatch(ctx, client, res, ns, listRV(list))
	case apierrors.IsBadRequest(err):
		return fmt.Errorf("source: list %s with label selector %q and field selector %q: %w: %v",
			res.Name(), s.opts.LabelSelector, s.opts.FieldSelector, ErrBadSelector, err)
	default:
		return fmt.Errorf("source: list %s%s: %w", res.Name(), inNamespace(ns), err)
	}
}

// Run loads the checkpoint, starts one reflector per resource and
// namespace, and hands deltas to the Handler until ctx ends, or until a
// resource is no longer served at the version watched (a NotServedError).
// It returns once every reflector has stopped, so that no delta is handed
// over after Run returns.
func (s *Source) Run(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	trackers := make([]*tracker, len(s.opts.Resources))
	for i, res := range s.opts.Resources {
		snap, err := s.loader.Load(ctx, res.Name())
		if err != nil {
			return fmt.Errorf("source: load checkpoint of %s: %w", res.Name(), err)
		}
		s.log.Info("loaded checkpoint", "resource", res.Name(), "objects", len(snap.Objects),
			"lastResourceVersion", snap.LastResourceVersion)
		var fromBus map[string]bool
		var repairs map[string]Drift
		if s.opts.Bus != nil {
			prior, err := s.priorFromBus(ctx, res, snap)
			if err != nil {
				return err
			}
			snap, fromBus, repairs = prior.Snapshot, prior.fromBus, prior.repairs
		}
		trackers[i] = newTracker(res, snap.Objects, fromBus, len(s.namespacesFor(res)), s.handler, s.opts.OldObject, s.log)
		trackers[i].repairs = repairs
		trackers[i].observer = s.opts.Observer
		// On the parsed path a view filters and projects nothing (the
		// configuration refuses one there), but it still tells a position
		// recorded through an earlier view, so that what that view left
		// out is published again.
		trackers[i].view = s.opts.View
		rv, err := trackers[i].dateFrom(snap, func() (string, error) { return s.revision(ctx, res) })
		if err != nil {
			return fmt.Errorf("source: %s: read the revision to date what enters the stream again by: %w", res.Name(), err)
		}
		// When nothing was written to the cluster since the last state
		// committed, the revision must move before the lists begin:
		// what the first list dates must be newer than every state
		// committed, and not newer than the list itself.
		trackers[i].newerStart()
		if trackers[i].viewMoved {
			s.log.Info("the view may have changed since the last run: its changes found by the first list are dated by the resource's revision",
				"resource", res.Name(), "resourceVersion", rv)
		}
		s.opts.Observer.Synced(res, false)
	}

	// The raw path hands objects on with managedFields; the event writer
	// leaves it out as it copies them, unless it is kept.
	var transform cache.TransformFunc
	var expected runtime.Object = &unstructured.Unstructured{}
	switch {
	case s.path == PathRaw:
		expected = &rawObject{}
	case !s.opts.KeepManagedFields:
		transform = dropManagedFields
	}
	s.log.Info("objects handed on", "path", s.path)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		// A resource the cluster no longer serves (see Set): what is
		// known of it is gone with it.
		if errors.Is(context.Cause(ctx), errRetired) {
			for _, t := range trackers {
				if n := t.retire(); n > 0 {
					s.log.Info("resource no longer served: its objects still known are reported deleted", "resource", t.res.Name(), "objects", n)
				}
			}
		}
	}()
	served := s.startServedChecks(ctx, stop, &wg)
	hs := make([]*health, 0, len(s.health))
	for _, h := range s.health {
		h.heard(time.Now(), false) // the reflectors start now
		hs = append(hs, h)
	}
	wg.Go(func() {
		defer utilruntime.HandleCrash()
		watchdog(ctx, hs, s.opts.StallTimeout, s.log)
	})
	for _, t := range trackers {
		for _, ns := range s.namespacesFor(t.res) {
			st := &store{t: t, ns: ns, h: s.health[watchKey{t.res.Name(), ns}], transform: transform, relisted: func(ns, rv string) {
				s.relists.Add(1)
				s.opts.Observer.Relisted(t.res)
				s.log.Warn("relisted: the watch could not resume; changes found by the list are marked snapshot",
					"resource", t.res.Name(), "namespace", ns, "resourceVersion", rv)
			}}
			r := cache.NewReflectorWithOptions(served.listWatch(t.res, s.listWatch(t.res, ns)), expected, st,
				cache.ReflectorOptions{Name: t.res.Name() + inNamespace(ns), TypeDescription: t.res.GroupVersionResource.String()})
			wg.Go(func() {
				defer utilruntime.HandleCrash()
				r.RunWithContext(ctx)
			})
		}
	}

	for _, t := range trackers {
		select {
		case <-t.allListed:
		case <-ctx.Done():
			return notServed(ctx) // ctx ended before the initial list was in
		}
		s.opts.Observer.Synced(t.res, true)
		gone, candidates := t.finishInitialList()
		deleted, err := s.confirmGhosts(ctx, t, candidates)
		if err != nil {
			s.log.Warn("could not tell whether objects the bus holds are in the cluster; they stay on the bus until the next comparison",
				"resource", t.res.Name(), "err", err)
		}
		r := t.startRepair(deleted[:min(len(deleted), maxExamples)])
		s.log.Info("initial list done", "resource", t.res.Name(), "objects", t.size(), "deletedWhileAway", gone,
			"ghostsDeleted", r.Ghosts, "missingRepublished", r.Missing, "staleRepublished", r.Stale)
		if r.Total() > 0 {
			s.repaired(r)
		}
	}
	s.trackers.Store(&trackers)
	close(s.synced)

	<-ctx.Done()
	return notServed(ctx)
}

// revision reads res's current resourceVersion, with a list of one
// object, retrying for a minute while the API server fails.
func (s *Source) revision(ctx context.Context, res Resource) (string, error) {
	client := s.apiClient(res, s.namespacesFor(res)[0])
	b := backoff.NewExponentialBackOff()
	b.MaxElapsedTime = time.Minute
	return backoff.RetryNotifyWithData(func() (string, error) {
		list, err := client.List(ctx, s.listOptions(1))
		if err != nil {
			return "", err
		}
		if rv := listRV(list); rv != "" {
			return rv, nil
		}
		return "", backoff.Permanent(errors.New("the API server's list has no resourceVersion"))
	}, backoff.WithContext(b, ctx), func(err error, wait time.Duration) {
		s.log.Warn("reading the resource's revision failed; retrying", "resource", res.Name(), "in", wait, "err", err)
	})
}

// listWatch lists and watches res in ns with the configured selectors,
// reports the calls that fail, and tells the reflector's health what it
// hears (see health.go).
func (s *Source) listWatch(res Resource, ns string) cache.ListerWatcher {
	client := s.apiClient(res, ns)
	h := s.health[watchKey{res.Name(), ns}]
	tweak := func(o *metav1.ListOptions) {
		o.LabelSelector = s.opts.LabelSelector
		o.FieldSelector = s.opts.FieldSelector
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return s.list(ctx, client, res, ns, h, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return s.watch(ctx, client, res, ns, h, o)
		},
	}
	var semantics any = s.client
	if s.path == PathRaw {
		semantics = client
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, semantics)
}

// apiClient is the client of the source's path for res in ns.
func (s *Source) apiClient(res Resource, ns string) apiClient {
	if s.path == PathRaw {
		return rawClient{rest: s.opts.REST, res: res, ns: ns}
	}
	return parsedClient{ri: s.client.Resource(res.GroupVersionResource).Namespace(ns)}
}

// listRV is the resourceVersion of a list, "" if obj is none.
func listRV(obj runtime.Object) string {
	m, err := meta.ListAccessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

func (s *Source) onWatchError(ctx context.Context, res Resource, ns string, err error) {
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return
	}
	s.opts.Observer.WatchError(res)
	s.log.Warn("list or watch failed; retrying", "resource", res.Name(), "namespace", ns, "err", err)
}

// watchListRefused reports whether err is an API server refusing to
// stream a list as a watch (sendInitialEvents), which it does when that
// feature is off. The reflector then lists instead: nothing failed.
func watchListRefused(o metav1.ListOptions, err error) bool {
	return o.SendInitialEvents != nil && *o.SendInitialEvents &&
		(apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err))
}

// namespacesFor returns the namespaces to run informers in for res; ""
// means all namespaces.
func (s *Source) namespacesFor(res Resource) []string {
	if !res.Namespaced || len(s.opts.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return s.opts.Namespaces
}

func (s *Source) listOptions(limit int64) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: s.opts.LabelSelector, FieldSelector: s.opts.FieldSelector, Limit: limit}
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// dropManagedFields removes metadata.managedFields before an object is
// handed on.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	return obj, nil
}
