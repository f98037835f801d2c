package source

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cenkalti/backoff/v4"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/resourceversion"
)

// Repair is what one comparison of the bus with the cluster found wrong
// with one resource on the bus, and published to set right.
type Repair struct {
	Resource Resource
	// Ghosts are objects the bus held live and the cluster lacks: their
	// deletes were published.
	Ghosts int
	// Missing are objects the cluster holds and the bus lacked; Stale
	// those the bus held at an older state. Their current states were
	// published.
	Missing, Stale int
	// Examples names a few of the objects repaired.
	Examples []string
}

// Total is the number of objects repaired.
func (r Repair) Total() int { return r.Ghosts + r.Missing + r.Stale }

// RepairObserver is told of every repair of the bus, at start and by
// Set.Reconcile. An Observer (Options.Observer) that implements it is
// told.
type RepairObserver interface {
	Repaired(Repair)
}

// repaired tells the observer of r.
func (s *Source) repaired(r Repair) {
	if o, ok := s.opts.Observer.(RepairObserver); ok {
		o.Repaired(r)
	}
}

// busReadTimeout bounds the retries of reading the bus at start.
const busReadTimeout = time.Minute

// priorFromBus reads what the bus holds of res and merges it into snap,
// the checkpoint (see priorFromBus the function), retrying for a minute
// while the bus cannot be read.
func (s *Source) priorFromBus(ctx context.Context, res Resource, snap checkpoint.Snapshot) (busPrior, error) {
	b := backoff.NewExponentialBackOff()
	b.MaxElapsedTime = busReadTimeout
	held, err := backoff.RetryNotifyWithData(func() (map[string]Holding, error) {
		return s.opts.Bus.Holdings(ctx, res, s.busNamespaces(res))
	}, backoff.WithContext(b, ctx), func(err error, wait time.Duration) {
		s.log.Warn("reading what the bus holds failed; retrying", "resource", res.Name(), "in", wait, "err", err)
	})
	if err != nil {
		return busPrior{}, fmt.Errorf("source: read what the bus holds of %s: %w", res.Name(), err)
	}
	prior := priorFromBus(snap, held, s.busNamespaces(res))
	cmp := prior.cmp
	if cmp.Differs() {
		s.log.Warn("the checkpoint and the bus disagree: the bus is the record, so the first list publishes what the bus lacks or holds wrong",
			"resource", res.Name(), "onBus", cmp.Held, "checkpoint", len(snap.Objects), "onlyOnBus", cmp.OnlyOnBus,
			"notOnBus", cmp.NotOnBus, "examples", cmp.Examples)
	} else {
		s.log.Info("the bus agrees with the checkpoint", "resource", res.Name(), "objects", cmp.Held)
	}
	return prior, nil
}

// busNamespaces are the namespaces of res whose objects the bus is
// compared with: those the source watches; nil for all.
func (s *Source) busNamespaces(res Resource) []string {
	nss := s.namespacesFor(res)
	if slices.Contains(nss, "") {
		return nil
	}
	return nss
}

// confirmGhosts deletes from the bus each of candidates, objects the bus
// holds live and the tracker does not know, that the API server confirms
// gone: not found, or found as another object. One the API server still
// holds is left alone, and remembered: the source does not select it
// (another bridge's perhaps, under another selector), and it is not this
// source's to delete. Few candidates are read one by one; more with a
// list of each namespace watched, without the source's selectors. It
// returns the keys deleted, and an error when some could not be told.
func (s *Source) confirmGhosts(ctx context.Context, t *tracker, candidates []ghost) ([]string, error) {
	var deleted []string
	var unknown []ghost
	for _, g := range candidates {
		if !g.known {
			unknown = append(unknown, g)
		}
	}
	inCluster, err := s.uidsOf(ctx, t.res, unknown)
	if err != nil {
		return nil, fmt.Errorf("source: tell whether %d objects the bus holds of %s are in the cluster: %w", len(unknown), t.res.Name(), err)
	}
	left := 0
	for _, g := range candidates {
		uid, ok := inCluster[g.key]
		if !g.known && ok && uid == g.pos.UID {
			left++
			t.leftAlone(g.key, uid)
			continue
		}
		if !g.known && ok {
			// Another object under its key, perhaps not yet seen by the
			// watch: the delete is dated by the ghost's own state, so that
			// it cannot hide the new object's creation from a consumer.
			g.rv = g.pos.ResourceVersion
		}
		if t.deleteGhost(g) {
			deleted = append(deleted, g.key)
		}
	}
	if left > 0 {
		s.log.Info("the bus holds objects of the cluster that this bridge does not select; left as they are",
			"resource", t.res.Name(), "objects", left)
	}
	return deleted, nil
}

// manyGhosts is how many candidates confirmGhosts reads with one list
// rather than one by one.
const manyGhosts = 20

// uidsOf reads from the API server the uid of each object of gs that it
// holds, by key.
func (s *Source) uidsOf(ctx context.Context, res Resource, gs []ghost) (map[string]string, error) {
	out := map[string]string{}
	if len(gs) == 0 {
		return out, nil
	}
	if len(gs) <= manyGhosts {
		for _, g := range gs {
			o, err := s.get(ctx, res, g.key)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, err
			default:
				out[g.key] = o.uid
			}
		}
		return out, nil
	}
	// A list of each namespace watched (the bridge may read no other),
	// in pages, without the source's selectors.
	for _, ns := range s.namespacesFor(res) {
		client := s.apiClient(res, ns)
		opts := metav1.ListOptions{Limit: listPage}
		for {
			list, err := client.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				m, err := meta.Accessor(it)
				if err != nil {
					return nil, err
				}
				out[ObjectKey(m.GetNamespace(), m.GetName())] = string(m.GetUID())
			}
			lm, err := meta.ListAccessor(list)
			if err != nil || lm.GetContinue() == "" {
				break
			}
			opts.Continue = lm.GetContinue()
		}
	}
	return out, nil
}

// listPage is the page size of uidsOf's lists.
const listPage = 500

// leftAlone remembers an object of the cluster, on the bus, that the
// source does not select, so that later passes do not ask about it again
// while the bus holds it as that object.
func (t *tracker) leftAlone(key, uid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.foreign == nil {
		t.foreign = map[string]string{}
	}
	t.foreign[key] = uid
}

// startRepair is what the start repaired of the bus: the ghosts deleted
// and the states the first list published again. The repairs left are
// objects gone from the cluster too: the bus and the cluster agree.
func (t *tracker) startRepair(examples []string) Repair {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.repairs = nil
	return Repair{Resource: t.res, Ghosts: t.ghosts, Missing: t.repaired[DriftMissing], Stale: t.repaired[DriftStale], Examples: examples}
}

// inView is a copy of what the tracker knows of the objects in the view,
// by key.
func (t *tracker) inView() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := snapshot{known: make(map[string]ident, len(t.known)), newest: t.newestKnown(nil), views: maps.Clone(t.views)}
	for k, e := range t.known {
		if !e.out && !e.prior {
			out.known[k] = e.id
		}
	}
	return out
}

// snapshot is what a tracker knew of the objects in the view before a
// pass, and the newest resourceVersion it knew: a message on the bus newer
// than that is a change under way, not drift.
type snapshot struct {
	known  map[string]ident
	newest string
	// views are the objects' states in the view then.
	views map[string]string
}

// drift is what compareBus finds.
type drift struct {
	repair Repair
	// ghosts are the objects on the bus the tracker does not know in the
	// view, to confirm with the API server (confirmGhosts).
	ghosts []ghost
	// missing and stale are the keys of objects whose current state is to
	// be published again.
	missing, stale []string
}

// compareBus compares held, what the bus holds, with before, what the
// tracker knew of the objects in the view before every delta handed on
// until then was published (see Set.Reconcile), and with what it knows
// now. Objects on the bus that the tracker neither knew before nor knows
// now are ghosts: their deletes are handed on at once. Objects the
// tracker knew before and still knows as the same object, which the bus
// lacks (missing) or holds older than it was known before (stale), are
// returned, to be read from the API server and published again.
// Anything else that differs is a change under way, which its own delta
// sets right.
func (t *tracker) compareBus(snap snapshot, held map[string]Holding) drift {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := snap.known
	d := drift{repair: Repair{Resource: t.res}}
	var ghosts []string
	foreign := map[string]string{}
	for key, h := range held {
		if h.Deleted || h.UID == "" {
			continue
		}
		if _, was := before[key]; was {
			continue
		}
		if e, ok := t.known[key]; ok && !e.out {
			continue
		}
		if resourceversion.Before(snap.newest, h.ResourceVersion) {
			// Published after the snapshot: a change under way (an
			// object created and deleted meanwhile, its delete not yet
			// on the bus).
			continue
		}
		if uid, ok := t.foreign[key]; ok && uid == h.UID {
			foreign[key] = uid
			continue // the cluster holds it; not this source's
		}
		ghosts = append(ghosts, key)
	}
	// What is remembered of other bridges' objects is what the bus still
	// holds of them.
	t.foreign = foreign
	if len(ghosts) > 0 {
		slices.Sort(ghosts)
		rv := t.newestKnown(held)
		for _, key := range ghosts {
			h := held[key]
			e, known := t.known[key]
			d.ghosts = append(d.ghosts, ghost{key: key, pos: checkpoint.Position{UID: h.UID, ResourceVersion: h.ResourceVersion}, rv: rv,
				known: known && e.out && e.id.hasUID(h.UID)})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(before)) {
		id := before[key]
		e, ok := t.known[key]
		if !ok || e.out || !e.id.same(id) {
			// Changed since: its own delta, perhaps not on the bus yet
			// (or read past by the bus's reader), repairs it.
			continue
		}
		h, ok := held[key]
		switch {
		case !ok || h.Deleted || !id.hasUID(h.UID):
			d.missing = append(d.missing, key)
		case !id.olderThan(h.ResourceVersion):
		case t.view != nil && h.View != "" && t.view.Unchanged(h.View, snap.views[key]):
			// A later state whose projection the view left as the bus
			// holds it: not published, not drift.
		default:
			d.stale = append(d.stale, key)
		}
	}
	return d
}

// newestKnown is the newest resourceVersion the tracker or the bus knows
// of the resource: an object the tracker does not know was gone by then.
// Called with t.mu held.
func (t *tracker) newestKnown(held map[string]Holding) string {
	rv := t.newestList()
	for _, e := range t.known {
		if !e.id.isIntent() && (rv == "" || e.id.olderThan(rv)) {
			rv = e.id.RV()
		}
	}
	for _, h := range held {
		if resourceversion.Before(rv, h.ResourceVersion) || rv == "" {
			rv = h.ResourceVersion
		}
	}
	return rv
}

// republish hands on o, read from the API server, as the repair of an
// object the bus lacked (typ Added) or held at an older state (Updated),
// marked ReasonReconciled. It hands on nothing when the tracker no longer
// knows the object as o, knows a newer state (a list from a lagging
// cache), or o is not in the view: a change is under way, which its own
// delta sets right. It reports whether it handed o on.
func (t *tracker) republish(o object, typ DeltaType) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := o.key()
	e, ok := t.known[key]
	if !ok || e.out || e.prior || !e.id.hasUID(o.uid) || e.id.olderThan(o.rv) {
		return false
	}
	in, v := t.apply(o)
	if !in {
		return false
	}
	t.remember(key, o, v, false)
	d := t.delta(typ, o, true)
	t.viewed(&d, v)
	d.Reason = ReasonReconciled
	t.handler.OnDelta(d)
	return true
}

// reconcile compares what the bus holds of t's resource with before (see
// compareBus), and publishes what the bus lacks.
func (s *Source) reconcile(ctx context.Context, t *tracker, before snapshot) (Repair, error) {
	held, err := s.opts.Bus.Holdings(ctx, t.res, s.busNamespaces(t.res))
	if err != nil {
		return Repair{Resource: t.res}, fmt.Errorf("source: read what the bus holds of %s: %w", t.res.Name(), err)
	}
	d := t.compareBus(before, held)
	var errs []error
	deleted, err := s.confirmGhosts(ctx, t, d.ghosts)
	if err != nil {
		errs = append(errs, err)
	}
	for _, key := range deleted {
		d.repair.Examples = example(d.repair.Examples, key)
	}
	d.repair.Ghosts = len(deleted)
	for _, batch := range []struct {
		keys []string
		typ  DeltaType
		n    *int
	}{{d.missing, Added, &d.repair.Missing}, {d.stale, Updated, &d.repair.Stale}} {
		for _, key := range batch.keys {
			o, err := s.get(ctx, t.res, key)
			switch {
			case apierrors.IsNotFound(err):
				continue // deleted meanwhile: the watch reports it
			case err != nil:
				errs = append(errs, fmt.Errorf("source: read %s %s to publish it again: %w", t.res.Name(), key, err))
				continue
			}
			if t.republish(o, batch.typ) {
				*batch.n++
				d.repair.Examples = example(d.repair.Examples, key)
			}
		}
	}
	return d.repair, errors.Join(errs...)
}

// get reads the object of key of res from the API server.
func (s *Source) get(ctx context.Context, res Resource, key string) (object, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return object{}, err
	}
	o, err := s.apiClient(res, ns).Get(ctx, name)
	if err == nil && o.parsed != nil && !s.opts.KeepManagedFields {
		// As the reflectors' transform does on the parsed path.
		_, _ = dropManagedFields(o.parsed)
	}
	return o, err
}

// befores are what Reconcile knew of the objects of each tracker before
// the pipeline settled.
type befores struct {
	src      *Source
	trackers []*tracker
	known    []snapshot
	// done is closed once the source's Run returned: its trackers are
	// then no longer the resource's.
	done <-chan struct{}
}

// snapshot takes what the source's trackers know of the objects in the
// view; nothing before the source synced.
func (s *Source) snapshot() befores {
	b := befores{src: s}
	ts := s.trackers.Load()
	if ts == nil || s.opts.Bus == nil {
		return b
	}
	for _, t := range *ts {
		b.trackers = append(b.trackers, t)
		b.known = append(b.known, t.inView())
	}
	return b
}

// Reconcile compares what the bus holds of every resource watched with
// what the API server holds, as the watches report it, and publishes what
// the bus lacks: the delete of every object the bus holds live and the
// cluster lacks, and the current state, read from the API server, of every
// object the bus lacks or holds at an older state; each with
// ReasonReconciled. Objects that agree cost nothing: the comparison reads
// the bus, and the API server only for the objects to publish again.
//
// settle must return once every delta handed on before it was called is
// published (or the context ends): the bus then holds at least what the
// source knew before, and what differs from it is drift, not a change
// under way. Resources whose initial list is not done, and a Set without
// Options.Bus, are left out. The repairs it returns are one per resource
// compared; an error says which resources could not be compared (they
// are compared again by the next call).
func (s *Set) Reconcile(ctx context.Context, settle func(context.Context) error) ([]Repair, error) {
	// The members are read under s.mu, their trackers after it: a
	// tracker's lock may be held for long by a handler the pipeline holds
	// (see Handler), and s.mu must not wait for it, as Watches, which
	// /metrics and /readyz call, needs s.mu too.
	s.mu.Lock()
	var synced []*member
	for _, gr := range slices.SortedFunc(maps.Keys(s.members), compareGR) {
		m := s.members[gr]
		select {
		case <-m.synced:
			synced = append(synced, m)
		default:
		}
	}
	s.mu.Unlock()
	var all []befores
	for _, m := range synced {
		if b := m.src.snapshot(); len(b.trackers) > 0 {
			b.done = m.done
			all = append(all, b)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	if err := settle(ctx); err != nil {
		return nil, fmt.Errorf("source: wait for what was handed on to be published: %w", err)
	}
	var repairs []Repair
	var errs []error
	for _, b := range all {
		select {
		case <-b.done:
			continue // stopped meanwhile: its trackers are no longer the resource's
		default:
		}
		for i, t := range b.trackers {
			r, err := b.src.reconcile(ctx, t, b.known[i])
			if err != nil {
				errs = append(errs, err)
			}
			if r.Total() > 0 {
				b.src.repaired(r)
			}
			repairs = append(repairs, r)
		}
	}
	return repairs, errors.Join(errs...)
}
