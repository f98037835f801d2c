package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/internal/replica/access"
	"github.com/kubebus/bridge/internal/replica/cache"
)

// Defaults of Config.
const (
	// DefaultSyncTimeout bounds how long the first request of a resource
	// waits for its cache to hold the bus's state; past it, 504 and the
	// cache keeps filling for the next request.
	DefaultSyncTimeout = 30 * time.Second
	// DefaultBookmarkInterval is how often a watch that asked for
	// bookmarks is told its position, as the API server does about once a
	// minute; shorter, so that a client resumes close to where it was.
	DefaultBookmarkInterval = 15 * time.Second
	// DefaultMinRequestTimeout is the API server's --min-request-timeout:
	// a watch without timeoutSeconds ends after between one and two times
	// it.
	DefaultMinRequestTimeout = 30 * time.Minute
	// DefaultMaxLimit clamps a list's limit: a bigger one is served in
	// pages of this size, with a continue token.
	DefaultMaxLimit = 5000
	// DefaultMaxWatches bounds the watches served at once: each holds a
	// connection, a goroutine and a queue of up to Cache.QueueLength
	// changes, so that many stay within a pod's memory and file limits.
	DefaultMaxWatches = 10000
	// DefaultMaxWatchesPerUser bounds one user's watches at once, so that
	// one client that leaks watches does not take all of
	// DefaultMaxWatches; an informer holds one per resource.
	DefaultMaxWatchesPerUser = 1000
)

// ListerWatcherFunc makes the ListerWatcher of resource gr of cluster, read
// from the bus (consumer/nats.NewListerWatcher,
// consumer/kafka.NewListerWatcher). One is made per cache; it is closed,
// when it is an io.Closer, once its cache stops.
type ListerWatcherFunc func(cluster string, gr schema.GroupResource) (clientcache.ListerWatcher, error)

// Config is what a Server needs.
type Config struct {
	// Discovery reads the clusters' discovery documents. Required.
	Discovery consumer.DiscoveryLog
	// NewListerWatcher feeds the caches. Required.
	NewListerWatcher ListerWatcherFunc
	// Authenticator authenticates every request. Required.
	Authenticator authenticator.Request
	// Rules authorize every request, with its cluster in the request's
	// context (access.WithCluster, a cluster on the bus or
	// access.AllClusters), and narrow the all-clusters view to the
	// clusters of their Scope. Give them Server.Denied as OnDeny to count
	// denials. Required.
	Rules *access.RulesFile
	// Cache shapes each cache (ring size, watcher queue length).
	Cache cache.Options
	// SyncTimeout: DefaultSyncTimeout when zero.
	SyncTimeout time.Duration
	// BookmarkInterval: DefaultBookmarkInterval when zero.
	BookmarkInterval time.Duration
	// MinRequestTimeout: DefaultMinRequestTimeout when zero.
	MinRequestTimeout time.Duration
	// MaxLimit: DefaultMaxLimit when zero.
	MaxLimit int64
	// MaxWatches: DefaultMaxWatches when zero. A watch past it is
	// refused, 429.
	MaxWatches int
	// MaxWatchesPerUser, by authenticated user name:
	// DefaultMaxWatchesPerUser when zero. A watch past it is refused, 429.
	MaxWatchesPerUser int
	// Logger receives what the server reports; nil discards it.
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Server is the replica: a read-only Kubernetes API of every cluster on
// the bus. Handler serves it; Run keeps its discovery and caches current.
type Server struct {
	cfg  Config
	log  *slog.Logger
	disc *discovery
	m    *metrics
	caps *watchCaps

	mu      sync.Mutex
	ctx     context.Context // Run's, nil before
	wg      sync.WaitGroup
	caches  map[cacheKey]*cacheEntry
	running chan struct{}
	// ready is closed once the discovery is read (Ready).
	ready chan struct{}
}

type cacheKey struct {
	cluster string
	gr      schema.GroupResource
}

type cacheEntry struct {
	store *cache.Store
	res   schema.GroupVersionResource
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Discovery == nil {
		errs = append(errs, errors.New("replica: Config.Discovery is nil"))
	}
	if cfg.NewListerWatcher == nil {
		errs = append(errs, errors.New("replica: Config.NewListerWatcher is nil"))
	}
	if cfg.Authenticator == nil {
		errs = append(errs, errors.New("replica: Config.Authenticator is nil: nothing is served unauthenticated"))
	}
	if cfg.Rules == nil {
		errs = append(errs, errors.New("replica: Config.Rules is nil: nothing is served unauthorized"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = DefaultSyncTimeout
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = DefaultBookmarkInterval
	}
	if cfg.MinRequestTimeout <= 0 {
		cfg.MinRequestTimeout = DefaultMinRequestTimeout
	}
	if cfg.MaxLimit <= 0 {
		cfg.MaxLimit = DefaultMaxLimit
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.MaxWatchesPerUser <= 0 {
		cfg.MaxWatchesPerUser = DefaultMaxWatchesPerUser
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, disc: newDiscovery(), caps: newWatchCaps(cfg.MaxWatches, cfg.MaxWatchesPerUser), caches: map[cacheKey]*cacheEntry{}, running: make(chan struct{}), ready: make(chan struct{})}
	m, err := newMetrics(cfg.Registerer, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// Run follows the discovery documents and runs the caches requests start,
// until ctx ends; it then waits for the caches to stop and returns
// ctx.Err(), or the error that stopped the discovery.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		return errors.New("replica: Run called twice")
	}
	s.ctx = ctx
	close(s.running)
	s.mu.Unlock()
	go s.awaitDiscovery(ctx)
	err := s.disc.run(ctx, s.cfg.Discovery)
	s.wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("replica: discovery: %w", err)
}

// Ready is nil once the replica serves the discovery the bus holds, and
// says what it waits for until then; it is the replica's readiness. The
// discovery is read once Config.Discovery has read the bus to its end,
// when it tells (consumer.DiscoverySynced, as consumer/nats's and
// consumer/kafka's do): it then holds every cluster's document the bus
// held, or the bus held none. A DiscoveryLog that cannot tell is taken as
// read once it passed a first document, or SyncTimeout after Run began,
// which is logged.
func (s *Server) Ready() error {
	select {
	case <-s.ready:
		return nil
	default:
	}
	select {
	case <-s.running:
	default:
		return errors.New("replica: not running yet")
	}
	return errors.New("replica: the discovery documents are not read yet: the bus cannot be read, or holds no discovery stream or topic (no bridge has published to it yet)")
}

// awaitDiscovery closes s.ready once the discovery is read (Ready).
func (s *Server) awaitDiscovery(ctx context.Context) {
	if ds, ok := s.cfg.Discovery.(consumer.DiscoverySynced); ok {
		select {
		case <-ds.Synced():
			s.log.Info("replica: ready: discovery read to the end of the bus", "clusters", len(s.disc.clusters()))
			close(s.ready)
		case <-ctx.Done():
		}
		return
	}
	t := time.NewTimer(s.cfg.SyncTimeout)
	defer t.Stop()
	select {
	case <-s.disc.first:
		s.log.Info("replica: ready: a first discovery document read (the discovery log cannot tell when it has read the bus to its end)")
	case <-t.C:
		s.log.Warn("replica: ready without a discovery document: none within the sync timeout, and the discovery log cannot tell whether the bus holds any", "timeout", s.cfg.SyncTimeout.String())
	case <-ctx.Done():
		return
	}
	close(s.ready)
}

// store returns the cache of res in cluster, started on first use, once
// it holds the bus's state; it waits at most SyncTimeout (or until ctx
// ends).
func (s *Server) store(ctx context.Context, cluster string, res schema.GroupVersionResource) (*cache.Store, error) {
	select {
	case <-s.running:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	k := cacheKey{cluster: cluster, gr: res.GroupResource()}
	s.mu.Lock()
	e, ok := s.caches[k]
	if !ok {
		if err := s.ctx.Err(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		lw, err := s.cfg.NewListerWatcher(cluster, k.gr)
		if err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("replica: cache of %s in cluster %q: %w", k.gr, cluster, err)
		}
		e = &cacheEntry{store: cache.NewStore(s.cfg.Cache), res: res}
		s.caches[k] = e
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			name := cluster + "/" + k.gr.String()
			s.log.Info("replica: cache started", "cluster", cluster, "resource", k.gr.String())
			_ = cache.Run(s.ctx, name, lw, e.store)
			if c, ok := lw.(io.Closer); ok {
				if err := c.Close(); err != nil {
					s.log.Warn("replica: close ListerWatcher", "cluster", cluster, "resource", k.gr.String(), "err", err)
				}
			}
		}()
	}
	s.mu.Unlock()
	t := time.NewTimer(s.cfg.SyncTimeout)
	defer t.Stop()
	select {
	case <-e.store.Synced():
		return e.store, nil
	case <-t.C:
		return nil, errNotSynced
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var errNotSynced = errors.New("replica: cache not synced")

// eachStore calls fn for every cache, for the metrics.
func (s *Server) eachStore(fn func(cluster string, gr schema.GroupResource, st *cache.Store)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.caches {
		fn(k.cluster, k.gr, e.store)
	}
}
