package source

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Selected is what a selection's patterns select from what the API
// server serves now.
type Selected struct {
	// Resources are the resources selected, at their preferred version,
	// by group-resource.
	Resources map[schema.GroupResource]Resource
	// Failed are the groups whose discovery failed (an aggregated API
	// that is not available): what is watched of them is kept as it is.
	Failed map[string]error
	// Unmatched are the exclusions, as given, that match no resource the
	// API server serves (at its preferred version); none when a group's
	// discovery failed, since an exclusion may match one of its resources.
	Unmatched []string
}

// selector selects resources with discovery, logging each resource it
// skips for lack of list or watch once.
type selector struct {
	sel  Selection
	disc discovery.DiscoveryInterface
	log  *slog.Logger

	mu sync.Mutex
	// unwatchable are the resources skipped for lack of list or watch,
	// logged once each.
	unwatchable map[schema.GroupResource]bool
}

func newSelector(sel Selection, disc discovery.DiscoveryInterface, log *slog.Logger) *selector {
	return &selector{sel: sel, disc: disc, log: log, unwatchable: map[schema.GroupResource]bool{}}
}

// patterned returns what the selection's patterns select now: one
// version per group-resource, the preferred one (as
// discovery.ServerPreferredResources chooses it), subresources left out
// silently (they are not resources of their own), and resources that do
// not support both list and watch left out and logged once each.
func (s *selector) patterned() (Selected, error) {
	out := Selected{Resources: map[schema.GroupResource]Resource{}, Failed: map[string]error{}}
	if !s.sel.Patterned() {
		return out, nil
	}
	lists, err := discovery.ServerPreferredResources(s.disc)
	var failed *discovery.ErrGroupDiscoveryFailed
	switch {
	case errors.As(err, &failed):
		for gv, gerr := range failed.Groups {
			out.Failed[gv.Group] = gerr
		}
	case err != nil:
		return Selected{}, fmt.Errorf("source: discover the resources the API server serves: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var served []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue // not a group version: nothing of it can be watched
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			served = append(served, gvr)
			if !s.sel.matches(gvr) {
				continue
			}
			if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				if !s.unwatchable[gvr.GroupResource()] {
					s.unwatchable[gvr.GroupResource()] = true
					s.log.Info("not watched: the resource does not support list and watch", "resource", gvr.GroupResource().String(),
						"version", gvr.Version, "verbs", r.Verbs)
				}
				continue
			}
			out.Resources[gvr.GroupResource()] = Resource{GroupVersionResource: gvr, Kind: r.Kind, Namespaced: r.Namespaced}
		}
	}
	if len(out.Failed) == 0 {
		out.Unmatched = s.sel.unmatchedExclusions(served)
	}
	return out, nil
}
