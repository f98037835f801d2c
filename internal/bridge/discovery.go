package bridge

import (
	"github.com/kubebus/bridge/internal/discoverydoc"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// watchChanges is the set's observer: it tells the metrics what the set
// tells it, and signals on changed each change of the resources watched,
// for the discovery document. It never blocks.
type watchChanges struct {
	source.SetObserver
	changed chan struct{}
}

func (w watchChanges) Watching(res source.Resource, added bool) {
	w.SetObserver.Watching(res, added)
	w.signal()
}

func (w watchChanges) NotWatching(res source.Resource, removed bool) {
	w.SetObserver.NotWatching(res, removed)
	w.signal()
}

func (w watchChanges) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// newDiscoveryPublisher makes the publisher of the cluster's discovery
// document to s; nil when s cannot hold one (the stdout sink, or a sink
// given with WithSink that does not).
func (b *Bridge) newDiscoveryPublisher(s sink.Sink, set *source.Set, cl clients, changed <-chan struct{}) (*discoverydoc.Publisher, error) {
	w, ok := s.(sink.DiscoveryWriter)
	if !ok {
		b.log.Info("the sink keeps no discovery document: readers of the bus cannot serve the cluster's discovery", "sink", b.cfg.Sink)
		return nil, nil
	}
	return discoverydoc.New(discoverydoc.Options{
		Cluster:   b.cfg.ClusterName,
		Server:    b.rest.Host,
		Resources: set.Resources,
		Keep:      func() []wire.DiscoveredResource { return b.keptDiscovery },
		Changes:   changed,
		Discovery: cl.disc,
		CRDs:      cl.follow,
		Writer:    w,
	}, b.log.With("component", "discovery"))
}
