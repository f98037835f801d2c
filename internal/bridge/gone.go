package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"

	"github.com/cenkalti/backoff/v4"
	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/config"
	"github.com/kubebus/bridge/internal/retry"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// goneRecheck is how long the bridge waits before it asks discovery a
// second time whether a resource it published before is still served: an
// API server that is starting, or whose aggregated API is briefly away,
// can miss a group for a moment; one deleted stays missing.
const goneRecheck = 5 * time.Second

// retirement is what retireGone did. kept are the resources of the bus's
// discovery document, not watched, that the document of this start must
// name still, as the bus may hold objects of theirs that were not deleted:
// whether they are gone could not be told, or their deletes could not be
// handed on. unread is true when the document could not be read (or the
// deletes were not seen through): the document of this start must name
// every resource the old one did (see rereadDiscovery). deleted counts the
// deletes handed on.
type retirement struct {
	kept    []wire.DiscoveredResource
	unread  bool
	deleted int
}

// errCannotTake: the sink cannot take the deletes of a resource.
var errCannotTake = errors.New("the sink cannot take the deletes")

// retireGone finds the resources whose objects the checkpoint holds, or
// that the bus's discovery document named when e's sink was opened
// (e.before, in a state layout), and the
// bridge no longer watches, because the cluster serves them no more (a
// CRD deleted while the bridge was down), and publishes, through h, the
// delete of each of their objects that the bus (in a state layout) or the
// checkpoint holds, marked reconciled. The discovery document is the
// bus's own record of what was published, so a checkpoint lost meanwhile
// loses nothing, as long as the document of this start names what could
// not be retired (see retirement, and run). A resource counts as gone
// only when discovery, asked twice goneRecheck apart, serves it at no
// version. A resource still served that the selection no longer selects
// (the configuration changed) has its objects deleted the same way when
// the checkpoint holds objects of it; named by the bus's document alone,
// it may be another bridge's of the same cluster name, and is left. One
// it selects but does not watch (left out for a fault of its own, such as
// a forbidden list) is left as it is. It returns once the deletes are
// handed on. The checkpoint is e's store, and e's sink takes the deletes.
func (b *Bridge) retireGone(ctx context.Context, dc discovery.DiscoveryInterfaceWithContext, e ends, watched []source.Resource, bus source.Bus, h source.Handler) (retirement, error) {
	var out retirement
	// What the bus says was published, as its discovery document
	// describes it: the resources the bus may hold objects of. Each is
	// kept in the document of this start unless settled below.
	named := map[string]wire.DiscoveredResource{}
	settled := map[string]bool{}
	done := func(err error) (retirement, error) {
		for name, r := range named {
			if !settled[name] {
				out.kept = append(out.kept, r)
			}
		}
		// In a set order, so that a start with nothing changed makes the
		// document the bus holds.
		slices.SortFunc(out.kept, func(a, b wire.DiscoveredResource) int {
			return strings.Compare(resourceOf(a).Name(), resourceOf(b).Name())
		})
		return out, err
	}
	if bus != nil {
		if e.beforeErr != nil {
			out.unread = true
			b.log.Warn("could not read the discovery document on the bus: only the resources the checkpoint holds objects of are checked for being gone; the document is read again before this start writes its own", "err", e.beforeErr)
		}
		for _, r := range e.before {
			named[resourceOf(r).Name()] = r
		}
	}
	names, err := unwatched(ctx, e.store, watched)
	if err != nil {
		return done(err)
	}
	snaps := map[string]checkpoint.Snapshot{}
	for _, name := range names {
		snap, err := e.store.Load(ctx, name)
		if err != nil {
			return done(err)
		}
		if len(snap.Objects) > 0 {
			snaps[name] = snap
		}
	}
	// Only the resources the cluster no longer serves are retired on the
	// document's word alone: their objects are gone whoever published
	// them.
	for name := range named {
		if _, ok := snaps[name]; !ok {
			snaps[name] = checkpoint.Snapshot{Objects: map[string]checkpoint.Position{}}
		}
	}
	if len(snaps) == 0 {
		return done(nil)
	}
	// Resources still served that the selection no longer selects, as
	// discovery describes them.
	sel := b.cfg.Selection()
	unselected := map[string]source.Resource{}
	all := maps.Clone(snaps)
	for attempt := range 2 {
		if len(snaps) == 0 {
			break
		}
		if attempt > 0 {
			select {
			case <-time.After(goneRecheck):
			case <-ctx.Done():
				return done(ctx.Err())
			}
		}
		groups, err := restmapper.GetAPIGroupResourcesWithContext(ctx, dc)
		// A group whose discovery failed (an aggregated API that is
		// away) may serve the resource: unknown is not gone.
		failed := map[string]bool{}
		var partial *discovery.ErrGroupDiscoveryFailed
		switch {
		case errors.As(err, &partial):
			for gv := range partial.Groups {
				failed[gv.Group] = true
			}
		case err != nil:
			return done(fmt.Errorf("discovery: %w", err))
		}
		for name := range snaps {
			gr := schema.ParseGroupResource(name)
			if failed[gr.Group] {
				b.log.Info("not telling whether a resource published before is gone: its group's discovery failed; asked again at the next start",
					"resource", name, "err", partial.Groups)
				delete(snaps, name)
				continue
			}
			if res, ok := servedAs(groups, gr); ok {
				delete(snaps, name)
				if sel.Selects(res.GroupVersionResource) {
					// Selected, not watched: a resource left out for a
					// fault of its own (forbidden, failing), tried again.
					continue
				}
				if len(all[name].Objects) == 0 {
					b.log.Info("resource not selected that the bus's discovery document names: its objects on the bus are left, as the checkpoint does not tell that this bridge published them",
						"resource", name)
					settled[name] = true
					continue
				}
				unselected[name] = res
			}
		}
	}
	if bus == nil {
		// Without a bus that holds the state (the history layout), the
		// stream keeps every message anyway.
		for name, snap := range snaps {
			b.log.Info("resource no longer served: the checkpoint holds objects of it, which stay as they are in the history layout",
				"resource", name, "objects", len(snap.Objects))
		}
		for name := range unselected {
			b.log.Info("resource no longer selected: the checkpoint holds objects of it, which stay as they are in the history layout",
				"resource", name, "objects", len(all[name].Objects))
		}
		return done(nil)
	}
	retireOne := func(name string, res source.Resource, snap checkpoint.Snapshot, why string) error {
		n, err := b.retire(ctx, e.sink, res, snap, bus, h, why)
		out.deleted += n
		switch {
		case errors.Is(err, errCannotTake):
			return nil // logged; the document keeps it
		case err != nil:
			return err
		}
		settled[name] = true
		return nil
	}
	for name, res := range unselected {
		if err := retireOne(name, res, all[name], "resource no longer selected (BRIDGE_RESOURCES or BRIDGE_EXCLUDE_RESOURCES changed)"); err != nil {
			return done(err)
		}
	}
	for name, snap := range snaps {
		res := source.Resource{GroupVersionResource: schema.ParseGroupResource(name).WithVersion("")}
		if r, ok := named[name]; ok {
			res = resourceOf(r)
		}
		if err := retireOne(name, res, snap, "resource no longer served (its CRD deleted while the bridge was down?)"); err != nil {
			return done(err)
		}
	}
	return done(nil)
}

// retire publishes through h the deletes of the objects of res, a
// resource no longer watched, that the bus or snap, its checkpoint, hold
// in the namespaces watched (see source.Retire), once s is ready for them,
// and returns how many it handed on; why says why, in the log. A resource
// whose version or kind is not known (no longer served) is described from
// what the bus holds. When s cannot take the deletes, it logs that and
// returns errCannotTake.
func (b *Bridge) retire(ctx context.Context, s sink.Sink, res source.Resource, snap checkpoint.Snapshot, bus source.Bus, h source.Handler, why string) (int, error) {
	if err := prepare(ctx, s, res); err != nil {
		b.log.Warn(why+": its objects stay on the bus, since the sink cannot take their deletes", "resource", res.Name(), "err", err)
		return 0, fmt.Errorf("%s: %w: %w", res.Name(), errCannotTake, err)
	}
	held, err := bus.Holdings(ctx, res, nil)
	if err != nil {
		return 0, err
	}
	if res.Kind == "" {
		describe(&res, snap, held)
	}
	var namespaces []string
	if len(b.cfg.Namespaces) > 0 {
		namespaces = b.cfg.Namespaces
	}
	n := source.Retire(res, snap, held, namespaces, h)
	b.metrics.Repaired(source.Repair{Resource: res, Ghosts: n})
	if n == 0 {
		b.log.Info(why+": the bus holds no object of it", "resource", res.Name(), "kind", res.Kind, "version", res.Version)
		return 0, nil
	}
	b.log.Warn(why+": the objects published of it are deleted from the bus",
		"resource", res.Name(), "deletes", n, "kind", res.Kind, "version", res.Version)
	return n, nil
}

// publishedBefore are the resources that the latest discovery document of
// cluster on s's bus names and that are not among watched: resources
// published before, of which the bus may hold objects. None when s keeps
// no discovery document.
func publishedBefore(ctx context.Context, s sink.Sink, cluster string, watched []source.Resource) ([]wire.DiscoveredResource, error) {
	dw, ok := s.(sink.DiscoveryWriter)
	if !ok {
		return nil, nil
	}
	d, found, err := dw.LastDiscovery(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("read the discovery document on the bus: %w", err)
	}
	if !found {
		return nil, nil
	}
	var out []wire.DiscoveredResource
	for _, r := range d.Resources {
		name := resourceOf(r).Name()
		if !slices.ContainsFunc(watched, func(w source.Resource) bool { return w.Name() == name }) {
			out = append(out, r)
		}
	}
	return out, nil
}

// discoveryReread bounds how long a start that could not read the bus's
// discovery document tries again before it publishes its own anyway.
const discoveryReread = 5 * time.Minute

// rereadDiscovery reads the discovery document on s's bus again, with the
// bridge's backoff, for a start that could not read it (or could not see
// its deletes through): the document of this start keeps naming every
// resource the old one named and watched is not among, as returned, for
// the next start to retire. After discoveryReread it gives up, logs that
// the record of those resources is lost, and returns none. ok is false
// when ctx ended first.
func (b *Bridge) rereadDiscovery(ctx context.Context, s sink.Sink, watched []source.Resource) (kept []wire.DiscoveredResource, ok bool) {
	bounded, cancel := context.WithTimeout(ctx, discoveryReread)
	defer cancel()
	var before []wire.DiscoveredResource
	var last error
	err := backoff.RetryNotify(func() error {
		before, last = publishedBefore(bounded, s, b.cfg.ClusterName, watched)
		return last
	}, backoff.WithContext(retry.New(time.Second, 30*time.Second), bounded), func(err error, wait time.Duration) {
		b.log.Warn("could not read the discovery document on the bus; trying again before this start writes its own, for at most "+discoveryReread.String(), "err", err, "retryIn", wait)
	})
	switch {
	case ctx.Err() != nil:
		return nil, false
	case err != nil:
		b.log.Error("could not read the discovery document on the bus for "+discoveryReread.String()+"; publishing this start's, which names only the resources watched: objects of resources published before that are gone may stay on the bus",
			"err", last)
		return nil, true
	}
	return before, true
}

// resourceOf is the resource a discovery document describes with r.
func resourceOf(r wire.DiscoveredResource) source.Resource {
	return source.Resource{GroupVersionResource: r.GroupVersionResource(), Kind: r.Kind, Namespaced: r.Namespaced}
}

// unwatched are the resources the checkpoint, store, holds objects of
// that are not among watched; none when the store cannot name its
// resources.
func unwatched(ctx context.Context, store checkpoint.Store, watched []source.Resource) ([]string, error) {
	lister, ok := store.(checkpoint.Lister)
	if !ok {
		return nil, nil
	}
	names, err := lister.Resources(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(names, func(name string) bool {
		return slices.ContainsFunc(watched, func(r source.Resource) bool { return r.Name() == name })
	}), nil
}

// describe fills in res's version, kind and scope from what the bus told
// of its objects, or the scope from the checkpoint's keys.
func describe(res *source.Resource, snap checkpoint.Snapshot, held map[string]source.Holding) {
	for key := range snap.Objects {
		res.Namespaced = strings.Contains(key, "/")
		break
	}
	for key, h := range held {
		res.Namespaced = strings.Contains(key, "/")
		if h.Kind != "" {
			res.Kind = h.Kind
			if gv, err := schema.ParseGroupVersion(h.APIVersion); err == nil {
				res.Version = gv.Version
			}
			return
		}
	}
}

// servedAs reports whether groups serve gr at any version, and the
// resource at its group's preferred version when they do (or the first
// version found).
func servedAs(groups []*restmapper.APIGroupResources, gr schema.GroupResource) (source.Resource, bool) {
	for _, g := range groups {
		if g.Group.Name != gr.Group {
			continue
		}
		var found *source.Resource
		for version, rs := range g.VersionedResources {
			for _, r := range rs {
				if r.Name != gr.Resource {
					continue
				}
				res := source.Resource{GroupVersionResource: gr.WithVersion(version), Kind: r.Kind, Namespaced: r.Namespaced}
				if found == nil || version == g.Group.PreferredVersion.Version {
					found = &res
				}
			}
		}
		if found != nil {
			return *found, true
		}
	}
	return source.Resource{}, false
}

// errCheckpointLost is wrapped by Run's error when the history layout's
// checkpoint is empty while the bus holds messages.
var errCheckpointLost = errors.New("the checkpoint is empty, but the bus holds messages of this cluster's resources")

// checkLostCheckpoint refuses a start in the history layout (no bus that
// holds the state) from an empty checkpoint when the bus holds messages
// of the resources watched: the checkpoint, the only record there of
// what was published, was lost (a file removed, a bucket or topic
// deleted), and a start would publish every object again and never the
// deletes made meanwhile. BRIDGE_CHECKPOINT_FRESH_START=true allows it.
// The checkpoint is e's store, and the bus is read through e's sink.
func (b *Bridge) checkLostCheckpoint(ctx context.Context, e ends, resources []source.Resource, bus source.Bus) error {
	if bus != nil || b.cfg.CheckpointFreshStart {
		return nil
	}
	if kind, _ := b.cfg.CheckpointKind(); kind == config.CheckpointNone {
		return nil
	}
	w, ok := e.sink.(sink.Witness)
	if !ok {
		return nil
	}
	if lister, ok := e.store.(checkpoint.Lister); ok {
		// Not empty: no resource needs to be loaded whole to tell.
		if names, err := lister.Resources(ctx); err == nil && len(names) > 0 {
			return nil
		}
	}
	gvrs := make([]schema.GroupVersionResource, len(resources))
	for i, res := range resources {
		snap, err := e.store.Load(ctx, res.Name())
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		if len(snap.Objects) > 0 || snap.LastResourceVersion != "" {
			return nil
		}
		gvrs[i] = res.GroupVersionResource
	}
	held, err := w.HoldsAny(ctx, b.cfg.ClusterName, gvrs, b.cfg.Namespaces)
	if err != nil {
		return fmt.Errorf("bridge: tell whether the bus holds messages, with the checkpoint empty: %w", err)
	}
	if held {
		return fmt.Errorf("bridge: BRIDGE_CHECKPOINT %s: %w (history layout, where the checkpoint is the only record of what was published): "+
			"it was lost, or belongs to another bridge; starting from it would publish every object again and never the deletes made meanwhile. "+
			"Point BRIDGE_CHECKPOINT at the checkpoint the bridge wrote, or set BRIDGE_CHECKPOINT_FRESH_START=true to start afresh knowingly",
			b.cfg.Checkpoint, errCheckpointLost)
	}
	return nil
}

// unwatchedInCheckpoint reports whether the checkpoint, store, holds
// objects of a resource that is not among watched.
func unwatchedInCheckpoint(ctx context.Context, store checkpoint.Store, watched []source.Resource) bool {
	names, err := unwatched(ctx, store, watched)
	return err == nil && len(names) > 0 // an error is told again by retireGone
}
