package replica

import (
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// discovery holds the latest discovery document of every cluster on the
// bus. All methods may be called concurrently.
type discovery struct {
	mu   sync.RWMutex
	docs map[string]wire.Discovery
	// first is closed once a document is held.
	first     chan struct{}
	firstOnce sync.Once
}

func newDiscovery() *discovery {
	return &discovery{docs: map[string]wire.Discovery{}, first: make(chan struct{})}
}

// run follows log until ctx ends.
func (d *discovery) run(ctx context.Context, log consumer.DiscoveryLog) error {
	return log.Follow(ctx, func(doc wire.Discovery) error {
		d.mu.Lock()
		d.docs[doc.Cluster] = doc
		d.mu.Unlock()
		d.firstOnce.Do(func() { close(d.first) })
		return nil
	})
}

// cluster returns the document of name.
func (d *discovery) cluster(name string) (wire.Discovery, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	doc, ok := d.docs[name]
	return doc, ok
}

// clusters lists the clusters with a document, sorted.
func (d *discovery) clusters() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.docs))
	for name := range d.docs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// resources are the resources of cluster; ok is false for a cluster with
// no document. For AllClusters, see merged.
func (d *discovery) resources(cluster string) ([]wire.DiscoveredResource, bool) {
	doc, ok := d.cluster(cluster)
	return doc.Resources, ok
}

// merged are the resources of every cluster in, in name order: for each
// group and resource, the version the first cluster that publishes it
// names. The all-clusters view of an identity is merged(its Scope), so
// that it learns of no resource only other clusters publish.
func (d *discovery) merged(in func(cluster string) bool) []wire.DiscoveredResource {
	var out []wire.DiscoveredResource
	seen := map[[2]string]bool{}
	for _, name := range d.clusters() {
		if !in(name) {
			continue
		}
		doc, _ := d.cluster(name)
		for _, r := range doc.Resources {
			k := [2]string{r.Group, r.Resource}
			if !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// findResource finds group/version/resource in rs.
func findResource(rs []wire.DiscoveredResource, group, version, resource string) (wire.DiscoveredResource, bool) {
	i := slices.IndexFunc(rs, func(r wire.DiscoveredResource) bool {
		return r.Group == group && r.Version == version && r.Resource == resource
	})
	if i < 0 {
		return wire.DiscoveredResource{}, false
	}
	return rs[i], true
}

// resource finds the resource group/version/resource of cluster.
func (d *discovery) resource(cluster, group, version, resource string) (wire.DiscoveredResource, bool) {
	rs, _ := d.resources(cluster)
	return findResource(rs, group, version, resource)
}
