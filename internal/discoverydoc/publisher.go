package discoverydoc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubebus/bridge/internal/retry"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// Defaults of Options.
const (
	// DefaultSettle is how long after a change the document is built: a
	// CRD's creation, establishment and the set's start of its watch come
	// as several events within a second, worth one document.
	DefaultSettle = time.Second
	// DefaultMaxDelay is the longest a change waits for its document
	// while changes keep coming, each within Settle of the last: a steady
	// trickle (a CRD per second, say) must not hold the document back for
	// good, and five documents a minute cost the bus nothing.
	DefaultMaxDelay = 5 * DefaultSettle
	// DefaultMaxRetryInterval is the longest wait between two tries to
	// write a document: short enough that the bus has the cluster's
	// discovery soon after it comes back, long enough to cost a broken bus
	// nothing.
	DefaultMaxRetryInterval = 30 * time.Second
	// firstRetry is the first wait after a failure.
	firstRetry = 500 * time.Millisecond
	// callTimeout bounds one read or write of the bus.
	callTimeout = 30 * time.Second
	// verifyAfter is when, after its first read of the bus, a Publisher
	// reads the bus again: a write of the previous leader, started before
	// this one became leader, has landed or failed by then (it was bounded
	// by callTimeout), so a document of it that landed after the first
	// read is seen and replaced.
	verifyAfter = callTimeout + time.Second
)

// ResourceLister reads a group-version's resources from the cluster's
// discovery; client-go's discovery clients are ones.
type ResourceLister interface {
	ServerResourcesForGroupVersionWithContext(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error)
}

// Options configure a Publisher. Cluster, Resources, Discovery and Writer
// are required.
type Options struct {
	// Cluster is the cluster's name (BRIDGE_CLUSTER_NAME).
	Cluster string
	// Server is the API server's address as the bridge reaches it (its
	// rest.Config's Host); any user information in it is left out.
	Server string
	// Resources returns the resources watched now.
	Resources func() []source.Resource
	// Keep, when set, returns resources the document names besides those
	// watched, as they are given (discovery is not asked about them):
	// resources published before whose objects the bus may hold still. One
	// that is watched again is described as a resource watched.
	Keep func() []wire.DiscoveredResource
	// Changes tells of a change of the resources watched (a send that
	// never blocks, of a channel of capacity 1, say). Nil: the resources
	// are only read at start and on CRD changes.
	Changes <-chan struct{}
	// Discovery describes each resource watched: its singular name,
	// short names and categories.
	Discovery ResourceLister
	// CRDs, when set, reads CustomResourceDefinitions, for their printer
	// columns; without it documents carry none.
	CRDs dynamic.Interface
	// Writer is the bus the documents go to.
	Writer sink.DiscoveryWriter
	// Settle is how long after the last change the document is built;
	// MaxDelay caps that wait from the first change not yet built, while
	// changes keep coming. Settle is DefaultSettle when zero; MaxDelay is
	// DefaultMaxDelay when zero, and never less than Settle;
	// MaxRetryInterval is DefaultMaxRetryInterval when zero.
	Settle           time.Duration
	MaxDelay         time.Duration
	MaxRetryInterval time.Duration
}

// Publisher publishes the discovery document of one cluster. See the
// package documentation for its guarantees.
type Publisher struct {
	opts Options
	log  *slog.Logger
	// changed is signalled by the CRD informer.
	changed chan struct{}
}

// New returns a Publisher; it checks that opts has what it needs.
func New(opts Options, log *slog.Logger) (*Publisher, error) {
	var errs []error
	if opts.Cluster == "" {
		errs = append(errs, errors.New("no cluster name"))
	}
	if opts.Resources == nil {
		errs = append(errs, errors.New("no resources"))
	}
	if opts.Discovery == nil {
		errs = append(errs, errors.New("no discovery client"))
	}
	if opts.Writer == nil {
		errs = append(errs, errors.New("no writer"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("discoverydoc: %w", err)
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	opts.MaxDelay = max(opts.MaxDelay, opts.Settle)
	if opts.MaxRetryInterval <= 0 {
		opts.MaxRetryInterval = DefaultMaxRetryInterval
	}
	opts.Server = withoutUserInfo(opts.Server)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{opts: opts, log: log, changed: make(chan struct{}, 1)}, nil
}

// Run publishes the document until ctx ends, then returns nil once the
// CRD informer has stopped. It never fails: what it cannot do now it
// tries again later.
func (p *Publisher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	crds := startCRDs(ctx, p.opts.CRDs, p.signal, &wg, p.log)

	// What the bus holds already: nothing is written while the document
	// is the same.
	last := p.read(ctx, nil)
	verify := time.NewTimer(verifyAfter)
	defer verify.Stop()

	// refresh, when the bus expires documents, writes the document again
	// before it does, changed or not.
	refresh := time.NewTimer(0)
	refresh.Stop()
	defer refresh.Stop()
	force := false

	bo := retry.New(firstRetry, p.opts.MaxRetryInterval)
	timer := time.NewTimer(0) // the first document, at once
	defer timer.Stop()
	// pending is when the first change not yet built came; zero when none.
	var pending time.Time
	settle := func() {
		now := time.Now()
		if pending.IsZero() {
			pending = now
		}
		timer.Reset(max(min(p.opts.Settle, pending.Add(p.opts.MaxDelay).Sub(now)), 0))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.opts.Changes:
			settle()
			continue
		case <-p.changed:
			settle()
			continue
		case <-verify.C:
			if held := p.read(ctx, last); !bytes.Equal(held, last) {
				// Another bridge wrote meanwhile: compare again.
				last = held
				timer.Reset(0)
			}
			continue
		case <-refresh.C:
			force = true
			timer.Reset(0)
			continue
		case <-timer.C:
		}
		pending = time.Time{}
		doc, incomplete := p.build(ctx, crds)
		if ctx.Err() != nil {
			return nil
		}
		again := false
		if c := canonical(doc); force || !bytes.Equal(c, last) {
			wctx, wcancel := context.WithTimeout(ctx, callTimeout)
			err := p.opts.Writer.WriteDiscovery(wctx, doc)
			wcancel()
			switch {
			case ctx.Err() != nil:
				return nil
			case err == nil:
				last, force = c, false
				p.log.Info("published the discovery document", "resources", len(doc.Resources))
				if r, ok := p.opts.Writer.(sink.DiscoveryRefresher); ok {
					if every := r.DiscoveryRefresh(); every > 0 {
						refresh.Reset(every)
					}
				}
			case sink.IsTerminal(err):
				p.log.Error("cannot publish the discovery document; trying again at the next change of the resources watched", "err", err)
			default:
				p.log.Warn("cannot publish the discovery document for now; trying again", "err", err)
				again = true
			}
		} else {
			p.log.Info("the bus holds the cluster's discovery document already; not published again", "resources", len(doc.Resources))
		}
		if incomplete != nil {
			p.log.Info("discovery does not describe every resource watched for now; its document says what the bridge knows of them, and is built again", "err", incomplete)
			again = true
		}
		if again {
			timer.Reset(bo.NextBackOff())
		} else {
			bo.Reset()
		}
	}
}

// read is the canonical form of the document the bus holds, or known when
// the bus holds none or cannot be read.
func (p *Publisher) read(ctx context.Context, known []byte) []byte {
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	held, ok, err := p.opts.Writer.LastDiscovery(rctx, p.opts.Cluster)
	switch {
	case err != nil && ctx.Err() == nil:
		p.log.Info("cannot read the discovery document the bus holds; publishing the cluster's", "err", err)
	case ok:
		return canonical(held)
	}
	return known
}

// signal tells Run of a change, without blocking.
func (p *Publisher) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// build makes the document of the resources watched now. Its error names
// the group-versions discovery could not describe; the document then
// holds what the bridge knows of their resources.
func (p *Publisher) build(ctx context.Context, crds crdColumns) (wire.Discovery, error) {
	resources := p.opts.Resources()
	described := map[schema.GroupVersion]map[string]metav1.APIResource{}
	var errs []error
	for _, r := range resources {
		gv := r.GroupVersion()
		if _, ok := described[gv]; ok {
			continue
		}
		list, err := p.opts.Discovery.ServerResourcesForGroupVersionWithContext(ctx, gv.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", gv, err))
			described[gv] = nil
			continue
		}
		byName := make(map[string]metav1.APIResource, len(list.APIResources))
		for _, ar := range list.APIResources {
			byName[ar.Name] = ar
		}
		described[gv] = byName
	}
	doc := wire.Discovery{Cluster: p.opts.Cluster, Server: p.opts.Server, Time: time.Now().UTC(),
		Resources: make([]wire.DiscoveredResource, 0, len(resources))}
	for _, r := range resources {
		dr := wire.DiscoveredResource{Group: r.Group, Version: r.Version, Resource: r.Resource, Kind: r.Kind, Namespaced: r.Namespaced,
			Columns: crds.columns(r.GroupVersionResource)}
		if singular, short, categories, ok := crds.names(r.GroupVersionResource); ok {
			dr.Singular, dr.ShortNames, dr.Categories = singular, nonEmpty(short), nonEmpty(categories)
		} else if ar, ok := described[r.GroupVersion()][r.Resource]; ok {
			dr.Singular, dr.ShortNames, dr.Categories = ar.SingularName, nonEmpty(ar.ShortNames), nonEmpty(ar.Categories)
		}
		if dr.Singular == "" {
			// What kubectl takes when discovery has none.
			dr.Singular = strings.ToLower(r.Kind)
		}
		doc.Resources = append(doc.Resources, dr)
	}
	if p.opts.Keep != nil {
		for _, k := range p.opts.Keep() {
			gr := schema.GroupResource{Group: k.Group, Resource: k.Resource}
			if !slices.ContainsFunc(resources, func(r source.Resource) bool { return r.GroupResource() == gr }) {
				doc.Resources = append(doc.Resources, k)
			}
		}
	}
	return doc, errors.Join(errs...)
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// canonical is d as it compares with another document: its JSON without
// its Time.
func canonical(d wire.Discovery) []byte {
	d.Time = time.Time{}
	if d.Resources == nil {
		d.Resources = []wire.DiscoveredResource{}
	}
	b, err := wire.MarshalDiscovery(d)
	if err != nil {
		return nil
	}
	return b
}

// withoutUserInfo is host with any user information left out.
func withoutUserInfo(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(host, "@"); i >= 0 && err != nil {
			return host[i+1:]
		}
		return host
	}
	u.User = nil
	return u.String()
}
