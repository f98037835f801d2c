package kafka

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

var _ sink.StateReader = (*Sink)(nil)

// stateReadTimeout bounds each request of ReadState but the reads.
const stateReadTimeout = 30 * time.Second

// HoldsState reports whether the sink writes the state layout.
func (s *Sink) HoldsState() bool { return s.cfg.Layout == LayoutState }

// ReadState reads the topic of resource to its end and calls fn with the
// latest record of each of the resource's objects, in no set order: its
// identity from the headers (a record written without HeaderUID is
// decoded), or Deleted for a tombstone or a delete. Records whose cluster
// header names another cluster are passed over.
func (s *Sink) ReadState(ctx context.Context, cluster string, resource schema.GroupVersionResource, namespaces []string, fn func(sink.Held) error) error {
	if !s.HoldsState() {
		return fmt.Errorf("kafka sink: BRIDGE_KAFKA_LAYOUT=%s keeps no state", s.cfg.Layout)
	}
	topic := s.cfg.TopicOf(resource)
	prefix := ""
	if s.cfg.Topic != "" {
		prefix = resource.GroupResource().String() + "/"
	}
	latest := map[string]sink.Held{}
	// The kind and apiVersion of the resource's objects, from the first
	// event decoded.
	var kind, apiVersion string
	client, done := s.clientFor(ctx, topic)
	defer done()
	err := s.cfg.Conn().ReadTopic(ctx, client, topic, func(m kafkago.Message) error {
		key, ok := strings.CutPrefix(string(m.Key), prefix)
		if !ok || key == "" {
			return nil // another resource's, in a topic for every resource
		}
		var uid, rv, typ, ofCluster, view string
		for _, h := range m.Headers {
			switch h.Key {
			case HeaderView:
				view = string(h.Value)
			case headerUID:
				uid = string(h.Value)
			case headerResourceVersion:
				rv = string(h.Value)
			case headerType:
				typ = string(h.Value)
			case headerCluster:
				ofCluster = string(h.Value)
			}
		}
		if ofCluster != "" && ofCluster != cluster {
			return nil
		}
		ns, name, found := strings.Cut(key, "/")
		if !found {
			ns, name = "", key
		}
		if len(namespaces) > 0 && !slices.Contains(namespaces, ns) {
			return nil
		}
		held := sink.Held{Namespace: ns, Name: name, UID: uid, ResourceVersion: rv, View: view}
		switch {
		case m.Value == nil:
			held = latest[key]
			held.Namespace, held.Name, held.Deleted = ns, name, true
		case uid == "" || rv == "" || kind == "":
			msg, err := wire.Kafka.Decode(m.Value, headerSeq(m.Headers))
			if err != nil {
				return fmt.Errorf("topic %s key %q: %w", topic, key, err)
			}
			if msg.Cluster != "" && msg.Cluster != cluster {
				return nil
			}
			held.UID, held.ResourceVersion, held.Deleted = msg.UID, msg.ResourceVersion, msg.Action == wire.ActionDeleted
			if kind == "" {
				kind, apiVersion = msg.Kind, msg.APIVersion
			}
		default:
			held.Deleted = strings.HasSuffix(typ, "."+wire.ActionDeleted)
		}
		latest[key] = held
		return nil
	})
	if err != nil {
		return fmt.Errorf("kafka sink: read topic %s: %w", topic, err)
	}
	for _, h := range latest {
		h.Kind, h.APIVersion = kind, apiVersion
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

// Headers the sink reads back of each record (wire.Kafka's).
var (
	headerUID             = wire.Kafka.HeaderOf("uid")
	headerResourceVersion = wire.Kafka.HeaderOf("resourceversion")
	headerType            = wire.Kafka.HeaderOf("type")
	headerCluster         = wire.Kafka.HeaderOf("cluster")
)

// headerSeq is a record's headers as wire reads them.
func headerSeq(hs []kafkago.Header) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, h := range hs {
			if !yield(h.Key, string(h.Value)) {
				return
			}
		}
	}
}

var _ sink.Witness = (*Sink)(nil)

// HoldsAny reports whether the topic of any of resources holds a record
// of cluster (of namespaces, when given, by its key): the topic is read
// until one, so a topic that other clusters share is read further. A
// tombstone that names no cluster (an earlier release's) does not count.
func (s *Sink) HoldsAny(ctx context.Context, cluster string, resources []schema.GroupVersionResource, namespaces []string) (bool, error) {
	found := errors.New("found")
	for _, res := range resources {
		topic := s.cfg.TopicOf(res)
		prefix := ""
		if s.cfg.Topic != "" {
			prefix = res.GroupResource().String() + "/"
		}
		client, done := s.clientFor(ctx, topic)
		err := s.cfg.Conn().ReadTopic(ctx, client, topic, func(m kafkago.Message) error {
			key, ok := strings.CutPrefix(string(m.Key), prefix)
			if !ok {
				return nil
			}
			ns, _, namespaced := strings.Cut(key, "/")
			if len(namespaces) > 0 && namespaced && !slices.Contains(namespaces, ns) {
				return nil
			}
			// Of this cluster: its header says so, or its event does.
			of, ok, _ := wire.Kafka.HeaderValue(headerSeq(m.Headers), "cluster")
			if !ok && m.Value != nil {
				msg, err := wire.Kafka.Decode(m.Value, headerSeq(m.Headers))
				if err != nil {
					return nil // not a record of the bridge's
				}
				of = msg.Cluster
			}
			if of == cluster {
				return found
			}
			return nil
		})
		done()
		switch {
		case errors.Is(err, found):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("kafka sink: read topic %s: %w", topic, err)
		}
	}
	return false, nil
}

// clientFor is a client whose metadata covers topic: the sink's own when
// it writes the topic, else one made for it (a resource the bridge no
// longer watches), which done releases.
func (s *Sink) clientFor(ctx context.Context, topic string) (*kafkago.Client, func()) {
	s.mu.Lock()
	known := slices.Contains(s.topics, topic) || s.opts.added
	s.mu.Unlock()
	if known {
		return s.client(stateReadTimeout), func() {}
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := s.cfg.Conn().Transport(tctx, []string{topic})
	return &kafkago.Client{Addr: s.addr, Transport: t, Timeout: stateReadTimeout}, func() {
		cancel()
		t.CloseIdleConnections()
	}
}
