package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/cenkalti/backoff/v4"
)

// errRetired is the cause a Set stops a resource's Source with when the
// cluster no longer serves the resource: the Source then reports what it
// still knows of the resource's objects as deleted (see tracker.retire).
var errRetired = errors.New("source: resource no longer served")

// errReplaced is the cause a Set stops a resource's Source with to watch
// it at another version.
var errReplaced = errors.New("source: resource served at another preferred version")

// errListFailing is the cause a Set stops the Source of a resource a
// pattern selects with when its initial list keeps failing, so that it
// neither holds its place among the initial lists nor Synced.
var errListFailing = errors.New("source: initial list failing")

// DefaultListConcurrency is SetOptions.ListConcurrency when unset.
const DefaultListConcurrency = 4

// SetOptions configure a Set.
type SetOptions struct {
	Selection Selection
	// Source are the options of each resource's Source; the Set sets
	// Resources.
	Source Options
	// ListConcurrency is how many resources' initial lists run at once;
	// zero means DefaultListConcurrency.
	ListConcurrency int
	// Prepare, when set, is called with each resource the Set is about to
	// start watching while it runs, so that what the deltas go to can take
	// them (a topic per resource). When it fails the resource is not
	// watched, and tried again at the next selection.
	Prepare func(ctx context.Context, res Resource) error
	// Follow, when set and the selection has a pattern, is the client the
	// Set watches CustomResourceDefinitions and APIServices with, to
	// select again whenever they change. It need not be wrapped with
	// WrapTransport.
	Follow dynamic.Interface
	// Observer, when set, is told which resources are watched.
	Observer SetObserver
}

// SetObserver is told of the resources a Set watches, for metrics. Its
// methods must not block.
type SetObserver interface {
	// Watching is told of each resource the Set starts watching; added is
	// true for one the cluster began serving while the Set ran.
	Watching(res Resource, added bool)
	// NotWatching is told of each resource the Set stops watching before
	// it ends; removed is true when the cluster no longer serves it (or
	// serves it at another version only, when the Set then watches it
	// there: removed is false then).
	NotWatching(res Resource, removed bool)
	// InitialList is told true as a resource's initial list starts (its
	// Source got a place among the initial lists), and false as it ends
	// (synced, or stopped first).
	InitialList(started bool)
}

type noSetObserver struct{}

func (noSetObserver) Watching(Resource, bool)    {}
func (noSetObserver) NotWatching(Resource, bool) {}
func (noSetObserver) InitialList(bool)           {}

// Set watches the resources a Selection selects, one Source per resource,
// and, when the selection has a pattern, follows the resources the
// cluster serves. See the package documentation for its guarantees.
type Set struct {
	client  dynamic.Interface
	opts    SetOptions
	loader  Loader
	handler Handler
	log     *slog.Logger
	// disc caches discovery; it is invalidated before each selection.
	disc     discovery.CachedDiscoveryInterface
	selector *selector
	observer SetObserver

	sem    chan struct{}
	synced chan struct{}
	// exits receives the members whose Source ended on its own.
	exits chan *member
	// relocating are the resources whose Source found them served at
	// another version only (a NotServedError): the selection that follows
	// watches them there, a move rather than an addition.
	relocating map[schema.GroupResource]bool
	// retiredRelists counts the relists of the Sources stopped.
	retiredRelists atomic.Int64

	mu sync.Mutex
	// members are the resources watched, by group-resource.
	members map[schema.GroupResource]*member
	// initial are the members started first: Synced waits for them.
	initial []*member
	// unmatched are the exclusions that matched nothing at Select.
	unmatched []string
	// warned are the resources a pattern selects that could not be
	// watched, warned of once each.
	warned map[schema.GroupResource]bool

	// follow, when the Set follows the cluster, tells it of changes, and
	// what discovery must show; settle spaces the selections made again
	// while discovery does not show it yet.
	follow *follower
	settle *backoff.ExponentialBackOff
	// queue holds the work of Run: selecting again (selectAll) and
	// retrying a resource left out (its group-resource), each with its own
	// backoff. pending are the resources left out, to retry.
	queue   workqueue.TypedRateLimitingInterface[schema.GroupResource]
	pending map[schema.GroupResource]Resource
}

// selectAll is the queue's key for selecting again; every other key is a
// resource to retry.
var selectAll = schema.GroupResource{}

// Retries of a resource left out: soon at first, for a brief fault, then
// less often, so that one the bridge is forbidden to read costs a list
// and a watch opened every five minutes.
const (
	retryFirst = time.Second
	retryMax   = 5 * time.Minute
)

// member is one resource the Set watches.
type member struct {
	res Resource
	// named is true for a resource named in the selection: its faults
	// are the bridge's, as when a Source watches it alone.
	named bool
	src   *Source
	// started is set once the Source got its place among the initial
	// lists and runs: until then its watches are not reported unhealthy.
	started atomic.Bool
	// stop ends the Source, with a cause: errRetired, errReplaced or
	// none when the Set ends.
	stop context.CancelCauseFunc
	// synced is closed once the Source synced, or ended first.
	synced chan struct{}
	// done is closed once the Source's Run returned, err its error.
	done chan struct{}
	err  error
}

// NewSet returns a Set. Nothing is contacted until Select. client is as
// New takes it; disc is a discovery client on the same API server.
func NewSet(client dynamic.Interface, disc discovery.DiscoveryInterface, opts SetOptions, loader Loader, h Handler, log *slog.Logger) *Set {
	if opts.ListConcurrency <= 0 {
		opts.ListConcurrency = DefaultListConcurrency
	}
	observer := opts.Observer
	if observer == nil {
		observer = noSetObserver{}
	}
	cached := memory.NewMemCacheClient(disc)
	return &Set{
		client: client, opts: opts, loader: loader, handler: h, log: log,
		disc: cached, selector: newSelector(opts.Selection, cached, log), observer: observer,
		sem: make(chan struct{}, opts.ListConcurrency), synced: make(chan struct{}),
		exits: make(chan *member), relocating: map[schema.GroupResource]bool{}, pending: map[schema.GroupResource]Resource{},
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[schema.GroupResource](retryFirst, retryMax)),
		members: map[schema.GroupResource]*member{}, warned: map[schema.GroupResource]bool{},
	}
}

// Select resolves the resources named and selects those the patterns
// select. Every name that does not resolve is reported, joined in one
// error that wraps ErrUnknownResource. Call it once, before Check.
func (s *Set) Select(ctx context.Context) error {
	named, err := Resolve(s.disc, s.opts.Selection.Names())
	if err != nil {
		return err
	}
	sel, err := s.selector.patterned()
	if err != nil {
		return err
	}
	for group, gerr := range sel.Failed {
		s.log.Warn("not watched for now: discovery of the group failed; tried again when API services change", "group", group, "err", gerr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unmatched = sel.Unmatched
	for _, r := range named {
		s.members[r.GroupResource()] = s.newMember(r, true)
	}
	for _, gr := range slices.SortedFunc(maps.Keys(sel.Resources), compareGR) {
		if _, ok := s.members[gr]; !ok {
			s.members[gr] = s.newMember(sel.Resources[gr], false)
		}
	}
	return nil
}

func compareGR(a, b schema.GroupResource) int {
	if a.Group != b.Group {
		if a.Group < b.Group {
			return -1
		}
		return 1
	}
	if a.Resource < b.Resource {
		return -1
	}
	if a.Resource > b.Resource {
		return 1
	}
	return 0
}

func (s *Set) newMember(res Resource, named bool) *member {
	opts := s.opts.Source
	opts.Resources = []Resource{res}
	return &member{res: res, named: named, src: New(s.client, opts, s.loader, s.handler, s.log),
		synced: make(chan struct{}), done: make(chan struct{})}
}

// UnmatchedExclusions are the exclusions, as given, that matched no
// resource the API server served at Select: most likely misspelt.
func (s *Set) UnmatchedExclusions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unmatched)
}

// Resources are the resources selected, sorted by name.
func (s *Set) Resources() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Resource, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, m.res)
	}
	slices.SortFunc(out, func(a, b Resource) int { return compareGR(a.GroupResource(), b.GroupResource()) })
	return out
}

// Check checks each resource selected as Source.Check does, at most
// ListConcurrency at once. A resource named that fails it fails Check,
// as does a selector the API server rejects; one that only a pattern
// selects and that fails it otherwise (forbidden, gone, or the API server
// failing) is left out, with a warning, and tried again when Run runs,
// with backoff, and at each selection.
func (s *Set) Check(ctx context.Context) error {
	s.mu.Lock()
	members := slices.Collect(maps.Values(s.members))
	s.mu.Unlock()
	errs := make([]error, len(members))
	sem := make(chan struct{}, s.opts.ListConcurrency)
	var wg sync.WaitGroup
	for i, m := range members {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = m.src.Check(ctx)
		})
	}
	wg.Wait()
	var failed []error
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range members {
		switch err := errs[i]; {
		case err == nil:
		case m.named || fatal(err):
			failed = append(failed, err)
		default:
			delete(s.members, m.res.GroupResource())
			s.warnOnce(m.res, err)
			s.pending[m.res.GroupResource()] = m.res
		}
	}
	return errors.Join(failed...)
}

// fatal reports whether err, the error of a resource that a pattern
// selects (its Check's, or its Source's Run), ends the Set rather than
// leaving the resource out: a selector the API server rejects is the
// configuration's fault, a transport not wrapped the program's, and an
// ended context the caller's. Any other fault is the resource's alone
// (the bridge may not read it, it is gone, its API or conversion webhook
// fails, the API server keeps throttling it), and the other resources
// are watched regardless.
func fatal(err error) bool {
	if errors.Is(err, errListFailing) {
		return false
	}
	return errors.Is(err, ErrBadSelector) || errors.Is(err, errNotWrapped) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// warnOnce warns that res, selected by a pattern, is not watched.
// Called with s.mu held.
func (s *Set) warnOnce(res Resource, err error) {
	if s.warned[res.GroupResource()] {
		return
	}
	s.warned[res.GroupResource()] = true
	s.log.Warn("not watched for now: the resource cannot be read; tried again later", "resource", res.Name(), "version", res.Version, "err", err)
}

// Synced is closed once every resource watched from the start has
// delivered its initial list, as Source.Synced (or stopped before, when
// the cluster stopped serving it).
func (s *Set) Synced() <-chan struct{} { return s.synced }

// Watches reports the health of every watch of every resource watched.
func (s *Set) Watches() []WatchStatus {
	s.mu.Lock()
	members := slices.SortedFunc(maps.Values(s.members), func(a, b *member) int {
		return compareGR(a.res.GroupResource(), b.res.GroupResource())
	})
	s.mu.Unlock()
	var out []WatchStatus
	for _, m := range members {
		sts := m.src.Watches()
		if !m.started.Load() {
			// Waiting for its place among the initial lists: its
			// watches have not begun, so they cannot have stalled.
			for i := range sts {
				sts[i].Err = nil
			}
		}
		out = append(out, sts...)
	}
	return out
}

// Healthy is nil while every watch of every resource watched is healthy,
// as Source.Healthy.
func (s *Set) Healthy() error { return unhealthy(s.Watches()) }

// Relists is how many times a resource was listed again after its first
// list, over every resource watched, as Source.Relists.
func (s *Set) Relists() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.retiredRelists.Load()
	for _, m := range s.members {
		n += m.src.Relists()
	}
	return n
}

// Run watches the resources checked, following the cluster when the
// selection has a pattern, until ctx ends or a resource named is no
// longer served at the version watched (a NotServedError, as Source.Run
// returns it). It returns once every Source has stopped.
func (s *Set) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer func() {
		cancel(nil)
		s.queue.ShutDown()
		s.mu.Lock()
		for _, m := range s.members {
			m.stop(nil)
		}
		s.mu.Unlock()
		if h, ok := s.handler.(Holder); ok {
			h.StopHolding()
		}
		wg.Wait()
	}()

	s.mu.Lock()
	for _, gr := range slices.SortedFunc(maps.Keys(s.members), compareGR) {
		m := s.members[gr]
		s.initial = append(s.initial, m)
		s.start(ctx, &wg, m, false)
	}
	initial := slices.Clone(s.initial)
	for gr := range s.pending {
		s.queue.AddRateLimited(gr)
	}
	s.mu.Unlock()
	wg.Go(func() {
		defer utilruntime.HandleCrash()
		for _, m := range initial {
			select {
			case <-m.synced:
			case <-ctx.Done():
				return
			}
		}
		close(s.synced)
	})
	wg.Go(func() {
		defer utilruntime.HandleCrash()
		for {
			gr, shutdown := s.queue.Get()
			if shutdown {
				return
			}
			if gr == selectAll {
				s.reselect(ctx, &wg)
			} else {
				s.retry(ctx, &wg, gr)
			}
			s.queue.Done(gr)
		}
	})

	// A change is selected for after a short quiet: a CRD's creation,
	// establishment and serving come as several events within a second
	// (the queue keeps the earliest time of a key added again).
	const debounce = 300 * time.Millisecond
	if s.opts.Selection.Patterned() && s.opts.Follow != nil {
		s.follow = &follower{client: s.opts.Follow, log: s.log, changed: func() { s.queue.AddAfter(selectAll, debounce) }}
		wg.Go(func() {
			defer utilruntime.HandleCrash()
			s.follow.run(ctx)
		})
	}

	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-s.exits:
			s.mu.Lock()
			current := s.members[m.res.GroupResource()] == m
			if current {
				delete(s.members, m.res.GroupResource())
				s.retiredRelists.Add(m.src.Relists())
			}
			s.mu.Unlock()
			if m.err == nil {
				m.err = fmt.Errorf("source: the watch of %s ended unexpectedly", m.res.Name())
			}
			var notServed *NotServedError
			switch {
			case !current:
			case m.named || fatal(m.err):
				return m.err
			case !errors.As(m.err, &notServed):
				// A fault of this resource alone: the others are
				// watched regardless, and it is tried again.
				s.log.Warn("resource not watched for now: its watch failed; tried again later", "resource", m.res.Name(), "err", m.err)
				s.observer.NotWatching(m.res, false)
				s.mu.Lock()
				s.pending[m.res.GroupResource()] = m.res
				s.mu.Unlock()
				s.queue.AddRateLimited(m.res.GroupResource())
			default:
				// A resource the cluster stopped serving at its
				// version: select again, which watches it at its
				// new version, if any.
				s.log.Info("resource not served at the version watched: selecting again", "resource", m.res.Name(), "err", m.err)
				s.observer.NotWatching(m.res, len(notServed.Served) == 0)
				if len(notServed.Served) > 0 {
					s.mu.Lock()
					s.relocating[m.res.GroupResource()] = true
					s.mu.Unlock()
				}
				s.queue.AddAfter(selectAll, debounce)
			}
		}
	}
}

// start runs m's Source on wg: it waits for a place among the initial
// lists in flight, runs the Source, and holds the place until the Source
// synced. A resource a pattern selects whose initial list keeps failing
// for longer than the stall timeout is stopped instead (errListFailing),
// and retried later. Called with s.mu held.
func (s *Set) start(ctx context.Context, wg *sync.WaitGroup, m *member, added bool) {
	mctx, stop := context.WithCancelCause(ctx)
	m.stop = stop
	s.observer.Watching(m.res, added)
	wg.Go(func() {
		defer utilruntime.HandleCrash()
		select {
		case s.sem <- struct{}{}:
		case <-mctx.Done():
			close(m.synced)
			close(m.done)
			return
		}
		m.started.Store(true)
		s.observer.InitialList(true)
		ran := make(chan struct{})
		go func() {
			defer utilruntime.HandleCrash()
			var check <-chan time.Time
			if !m.named {
				t := time.NewTicker(min(m.src.opts.StallTimeout/10, time.Second))
				defer t.Stop()
				check = t.C
			}
		wait:
			for {
				select {
				case <-m.src.Synced():
					// Watched: its next fault, if any, is retried
					// soon again.
					s.queue.Forget(m.res.GroupResource())
					break wait
				case <-ran:
					break wait
				case now := <-check:
					if err := m.src.failing(now); err != nil {
						stop(fmt.Errorf("%w: %w", errListFailing, err))
						<-ran
						break wait
					}
				}
			}
			// Counted out before the place is given up, so that the
			// count never shows more lists than places.
			s.observer.InitialList(false)
			<-s.sem
			close(m.synced)
		}()
		m.err = m.src.Run(mctx)
		if cause := context.Cause(mctx); errors.Is(cause, errListFailing) {
			m.err = cause
		}
		close(ran)
		close(m.done)
		if mctx.Err() == nil || errors.Is(m.err, errListFailing) {
			// Ended on its own, not stopped by the Set.
			select {
			case s.exits <- m:
			case <-ctx.Done():
			}
		}
	})
}

// reselect selects again and brings the resources watched in line: it
// starts those newly selected, stops those the cluster no longer serves
// (their objects still known are reported deleted), and watches those
// served at another preferred version there. It selects again later
// while discovery fails, or does not yet show what the CRDs say; a
// resource that cannot be started is retried with its own backoff.
func (s *Set) reselect(ctx context.Context, wg *sync.WaitGroup) {
	s.disc.Invalidate()
	sel, err := s.selector.patterned()
	if err != nil {
		s.log.Warn("cannot select the resources to watch: discovery failed; trying again", "err", err)
		if again := s.settleBackoff(); again > 0 {
			s.queue.AddAfter(selectAll, again)
		}
		return
	}
	if lag := s.discoveryLags(sel); lag != "" {
		if again := s.settleBackoff(); again > 0 {
			s.queue.AddAfter(selectAll, again)
		} else {
			s.log.Warn("discovery still does not show what the CustomResourceDefinitions define; selecting again at their next change", "resource", lag)
		}
	} else {
		s.settle = nil
	}
	gone, moved, added := s.plan(sel)

	for _, m := range gone {
		m.stop(errRetired)
		<-m.done
		s.retiredRelists.Add(m.src.Relists())
		s.observer.NotWatching(m.res, true)
		s.log.Info("resource removed: no longer served; not watched any more", "resource", m.res.Name(), "version", m.res.Version)
	}
	for _, m := range moved {
		m.stop(errReplaced)
		<-m.done
		s.retiredRelists.Add(m.src.Relists())
		s.observer.NotWatching(m.res, false)
	}
	for _, res := range added {
		if ctx.Err() != nil {
			return
		}
		s.add(ctx, wg, res, slices.ContainsFunc(moved, func(o *member) bool { return o.res.GroupResource() == res.GroupResource() }))
	}
}

// retry tries again to watch gr, left out for a fault, if it is still
// selected and not watched.
func (s *Set) retry(ctx context.Context, wg *sync.WaitGroup, gr schema.GroupResource) {
	s.mu.Lock()
	res, ok := s.pending[gr]
	_, watched := s.members[gr]
	s.mu.Unlock()
	if ok && !watched {
		s.add(ctx, wg, res, false)
	}
}

// add checks res, prepares for it and starts watching it. When either
// fails it is left out, warned of once, and retried with backoff.
func (s *Set) add(ctx context.Context, wg *sync.WaitGroup, res Resource, wasMoved bool) {
	gr := res.GroupResource()
	m := s.newMember(res, false)
	// Checked first: what the deltas go to is prepared (a topic made)
	// only for a resource that can be watched.
	err := m.src.Check(ctx)
	if err == nil && s.opts.Prepare != nil {
		err = s.opts.Prepare(ctx, res)
	}
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	if err != nil {
		s.warnOnce(res, err)
		s.pending[gr] = res
		s.mu.Unlock()
		s.queue.AddRateLimited(gr)
		return
	}
	delete(s.warned, gr)
	delete(s.pending, gr)
	s.members[gr] = m
	wasMoved = wasMoved || s.relocating[gr]
	delete(s.relocating, gr)
	s.start(ctx, wg, m, !wasMoved)
	s.mu.Unlock()
	if wasMoved {
		s.log.Info("resource served at another preferred version: watched there", "resource", res.Name(), "version", res.Version)
	} else {
		s.log.Info("resource added: watched from now on; its objects are published as added", "resource", res.Name(), "version", res.Version,
			"kind", res.Kind, "namespaced", res.Namespaced)
	}
}

// plan compares sel with the members and takes out of them those to stop:
// gone, no longer served, and moved, served at another preferred version.
// added are the resources to start, moved ones included. A resource
// discovery no longer shows is gone only when the CRDs, as the follower
// holds them, agree: while discovery lags a CRD's change it still shows
// it (or not yet), and a member of a group whose discovery failed is kept.
func (s *Set) plan(sel Selected) (gone, moved []*member, added []Resource) {
	var served map[schema.GroupResource]bool
	if s.follow != nil {
		served, _ = s.follow.expected()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for gr, m := range s.members {
		if m.named {
			continue
		}
		res, ok := sel.Resources[gr]
		_, failed := sel.Failed[gr.Group]
		switch {
		case !ok && !failed && !served[gr]:
			gone = append(gone, m)
		case ok && res.Version != m.res.Version:
			moved = append(moved, m)
		}
	}
	for _, gr := range slices.SortedFunc(maps.Keys(sel.Resources), compareGR) {
		if m, ok := s.members[gr]; !ok || slices.Contains(moved, m) {
			added = append(added, sel.Resources[gr])
		}
	}
	for _, m := range slices.Concat(gone, moved) {
		delete(s.members, m.res.GroupResource())
	}
	for gr := range s.relocating {
		if _, ok := sel.Resources[gr]; !ok {
			delete(s.relocating, gr)
		}
	}
	for gr := range s.pending {
		if _, ok := sel.Resources[gr]; !ok {
			delete(s.pending, gr)
		}
	}
	return gone, moved, added
}

// settleBackoff is how soon to select again after a selection that
// discovery failed, or did not yet bear out: soon at first, then less
// often, for a minute at most (0: no more; the next change of the CRDs,
// or the informers' resync, selects again).
func (s *Set) settleBackoff() time.Duration {
	if s.settle == nil {
		s.settle = backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond),
			backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(time.Minute))
	}
	d := s.settle.NextBackOff()
	if d == backoff.Stop {
		s.settle = nil
		return 0
	}
	return d
}

// discoveryLags names a resource that the CRDs, as the follower holds
// them, say is served (or gone) while the selection, from discovery, says
// otherwise; "" when they agree. Discovery follows a CRD's changes a
// moment after the CRD itself.
func (s *Set) discoveryLags(sel Selected) string {
	if s.follow == nil {
		return ""
	}
	served, gone := s.follow.expected()
	for _, gr := range slices.SortedFunc(maps.Keys(served), compareGR) {
		_, failed := sel.Failed[gr.Group]
		if _, ok := sel.Resources[gr]; !ok && !failed && s.opts.Selection.matches(gr.WithVersion("")) {
			return gr.String()
		}
	}
	for _, gr := range slices.SortedFunc(maps.Keys(gone), compareGR) {
		if _, ok := sel.Resources[gr]; ok {
			return gr.String()
		}
	}
	return ""
}
