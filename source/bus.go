package source

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/resourceversion"
)

// Holding is what the bus holds of one object: the identity and
// resourceVersion of its latest message there.
type Holding struct {
	UID             string
	ResourceVersion string
	// Deleted is true when the latest message says the object is gone: a
	// delete, or a tombstone that follows one.
	Deleted bool
	// Kind and APIVersion are the object's, when the bus tells them.
	Kind, APIVersion string
	// View is the object's state in the view it was published through
	// (Delta.View), when the bus keeps it.
	View string
}

// Bus reads back what the bus holds of a resource's objects. A bus in a
// state layout keeps each object's latest message for as long as the
// object lives, and so is the record that consumers trust: the source
// compares it with the cluster (see Options.Bus).
type Bus interface {
	// Holdings returns what the bus holds of res's objects in namespaces
	// (every namespace when it is empty), by ObjectKey.
	Holdings(ctx context.Context, res Resource, namespaces []string) (map[string]Holding, error)
}

// BusFunc adapts a function to Bus.
type BusFunc func(ctx context.Context, res Resource, namespaces []string) (map[string]Holding, error)

// Holdings calls f.
func (f BusFunc) Holdings(ctx context.Context, res Resource, namespaces []string) (map[string]Holding, error) {
	return f(ctx, res, namespaces)
}

// BusComparison is how the checkpoint and the bus compared at a start,
// before the first list: the bus wins every difference.
type BusComparison struct {
	// Held is the number of live objects the bus holds.
	Held int
	// OnlyOnBus are live objects on the bus that the checkpoint lacks, or
	// holds as another object, or at an older resourceVersion (a
	// checkpoint lost, or behind the bus after a crash).
	OnlyOnBus int
	// NotOnBus are objects the checkpoint holds as published and the bus
	// does not, or holds at an older resourceVersion (a message lost
	// from the bus, or an older one written over it).
	NotOnBus int
	// Examples names a few of them.
	Examples []string
}

// Differs reports whether the bus and the checkpoint disagreed.
func (c BusComparison) Differs() bool { return c.OnlyOnBus > 0 || c.NotOnBus > 0 }

// maxExamples is how many objects a log line names.
const maxExamples = 5

// example adds key to examples, up to maxExamples.
func example(examples []string, key string) []string {
	if len(examples) < maxExamples {
		examples = append(examples, key)
	}
	return examples
}

// busPrior is what priorFromBus makes of the checkpoint and the bus.
type busPrior struct {
	checkpoint.Snapshot
	// fromBus are the keys that only the bus knew: a list that lacks them
	// finds ghosts, deleted with ReasonReconciled once confirmed.
	fromBus map[string]bool
	// repairs are the keys the checkpoint holds as published and the bus
	// lacks (DriftMissing) or holds older (DriftStale): their states
	// found by the first list repair the bus, and are marked
	// ReasonReconciled, so that a bus that drops repeated event ids does
	// not drop them as repeats of the messages it lost.
	repairs map[string]Drift
	cmp     BusComparison
}

// Drift is a kind of difference between the bus and the cluster.
type Drift string

// The kinds of drift a comparison of the bus with the cluster repairs.
const (
	// DriftGhost: the bus holds a live object the cluster lacks.
	DriftGhost Drift = "ghost"
	// DriftMissing: the cluster holds an object the bus lacks.
	DriftMissing Drift = "missing"
	// DriftStale: the bus holds an older state of an object.
	DriftStale Drift = "stale"
)

// priorFromBus merges what the bus holds of the namespaces read (nil:
// every namespace) into snap, the checkpoint of a resource: in the state
// layouts the bus is the record, and the checkpoint a cache of it. Each
// live object on the bus is taken at its position there, with the view
// state the bus keeps beside it (or the checkpoint's, when both agree on
// the position); objects of the namespaces read that the bus does not
// hold are dropped, so that the first list publishes them (the
// checkpoint's intents included: a creation that did not reach the bus is
// published again). Positions of other namespaces (no longer watched)
// stay, so that the first list publishes their deletes. The resource's
// last resourceVersion is the newer of the checkpoint's and the bus's
// newest.
func priorFromBus(snap checkpoint.Snapshot, held map[string]Holding, namespaces []string) busPrior {
	out := busPrior{Snapshot: checkpoint.Snapshot{Objects: make(map[string]checkpoint.Position, len(held)), LastResourceVersion: snap.LastResourceVersion},
		fromBus: map[string]bool{}, repairs: map[string]Drift{}}
	cmp := &out.cmp
	for _, key := range slices.Sorted(maps.Keys(held)) {
		h := held[key]
		if resourceversion.Before(out.LastResourceVersion, h.ResourceVersion) || out.LastResourceVersion == "" {
			out.LastResourceVersion = h.ResourceVersion
		}
		if h.Deleted || h.UID == "" {
			continue
		}
		cmp.Held++
		p, ok := snap.Objects[key]
		switch {
		case ok && p.UID == h.UID && p.ResourceVersion == h.ResourceVersion:
			if p.View == "" {
				p.View = h.View
			}
			out.Objects[key] = p
			continue
		case !ok || p.UID != h.UID:
			out.fromBus[key] = true
		}
		if !ok || p.IsIntent() || p.UID != h.UID || resourceversion.Before(p.ResourceVersion, h.ResourceVersion) {
			cmp.OnlyOnBus++
			cmp.Examples = example(cmp.Examples, key)
		}
		out.Objects[key] = checkpoint.Position{UID: h.UID, ResourceVersion: h.ResourceVersion, View: h.View}
	}
	for _, key := range slices.Sorted(maps.Keys(snap.Objects)) {
		p := snap.Objects[key]
		if !inNamespaces(key, namespaces) {
			out.Objects[key] = p // not read: as the checkpoint has it
			continue
		}
		if p.IsIntent() {
			continue // a creation that may not have been published
		}
		// Only a bus that lost what the checkpoint holds published needs
		// a repair: one whose latest message is newer (a delete, or
		// another object, published after the last flush) is ahead.
		h, ok := held[key]
		switch {
		case !ok || (h.Deleted && resourceversion.Before(h.ResourceVersion, p.ResourceVersion)):
			out.repairs[key] = DriftMissing
		case !h.Deleted && h.UID == p.UID && resourceversion.Before(h.ResourceVersion, p.ResourceVersion):
			out.repairs[key] = DriftStale
		default:
			continue
		}
		cmp.NotOnBus++
		cmp.Examples = example(cmp.Examples, key)
	}
	return out
}

// inNamespaces reports whether the object of key is in namespaces (nil:
// every namespace); a cluster-scoped object is in every one.
func inNamespaces(key string, namespaces []string) bool {
	ns, _, namespaced := strings.Cut(key, "/")
	return namespaces == nil || !namespaced || slices.Contains(namespaces, ns)
}

// Retire hands on the delete of every object of res, a resource no longer
// watched, that held (what the bus holds, nil without a bus in a state
// layout) holds live or prior (its checkpoint) holds, each marked
// ReasonReconciled and dated by the newest resourceVersion known of the
// resource, so that the bus keeps none of them. Objects the bus holds in
// namespaces other than namespaces (nil: every namespace) are not the
// bridge's to delete, and are left. It returns how many deletes it
// handed on.
func Retire(res Resource, prior checkpoint.Snapshot, held map[string]Holding, namespaces []string, h Handler) int {
	if held != nil {
		held = maps.Clone(held)
		maps.DeleteFunc(held, func(key string, _ Holding) bool { return !inNamespaces(key, namespaces) })
		// What the bus holds live, and what the checkpoint holds besides:
		// a delete of an object the bus does not hold changes nothing
		// there, and removes its position from the checkpoint.
		merged := priorFromBus(prior, held, nil)
		for k, p := range prior.Objects {
			if _, ok := merged.Objects[k]; !ok {
				merged.Objects[k] = p
			}
		}
		prior = merged.Snapshot
	}
	t := newTracker(res, prior.Objects, nil, 1, h, false, nil)
	if prior.LastResourceVersion != "" {
		t.listRV[""] = prior.LastResourceVersion
	}
	return t.retireWith(ReasonReconciled)
}
