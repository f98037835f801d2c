package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

var _ sink.StateReader = (*Sink)(nil)

// stateBatch is how many messages ReadState asks the server for at once.
const stateBatch = 1000

// stateFetchWait is the longest ReadState waits for the next message of
// those the stream held when it began.
const stateFetchWait = 30 * time.Second

// HoldsState reports whether the sink writes the state layout of
// JetStream mode.
func (s *Sink) HoldsState() bool {
	return s.js != nil && s.cfg.Layout == LayoutState
}

// ReadState calls fn with the latest message of each object of resource
// and cluster the stream holds, read with headers only: one message per
// subject. A message that lacks the identity headers (one written before
// they were added, or by another writer) is read whole and decoded.
func (s *Sink) ReadState(ctx context.Context, cluster string, resource schema.GroupVersionResource, namespaces []string, fn func(sink.Held) error) error {
	if !s.HoldsState() {
		return errors.New("nats sink: the stream keeps no state (BRIDGE_NATS_LAYOUT=history, or core mode)")
	}
	var filters []string
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		f, err := s.tmpl.Filter(cluster, resource.GroupResource(), ns)
		if err != nil {
			return fmt.Errorf("nats sink: read the state of %s: %w", resource.GroupResource(), err)
		}
		filters = append(filters, f)
	}
	filter := strings.Join(filters, ", ")
	stream, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return fmt.Errorf("nats sink: stream %s: %w", s.cfg.Stream, err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    filters,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		HeadersOnly:       true,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("nats sink: read the state of %s on stream %s: %w", filter, s.cfg.Stream, err)
	}
	defer func() {
		if ci := cons.CachedInfo(); ci != nil {
			del, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = stream.DeleteConsumer(del, ci.Name)
			cancel()
		}
	}()
	ci := cons.CachedInfo()
	if ci == nil || ci.NumPending == 0 {
		return nil
	}
	// The subjects the consumer holds a last message of when it was made:
	// messages stored since are changes under way, not what the stream
	// held, and the read ends without them.
	want := ci.NumPending
	it, err := cons.Messages(jetstream.PullMaxMessages(stateBatch))
	if err != nil {
		return fmt.Errorf("nats sink: read the state of %s: %w", filter, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	// The kind and apiVersion of the resource's objects, told of the
	// first object: from its headers in binary mode, or its body.
	described := false
	for got := uint64(0); got < want; got++ {
		msg, err := it.Next(jetstream.NextMaxWait(stateFetchWait))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("nats sink: read the state of %s: %d of %d subjects read: %w", filter, got, want, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("nats sink: read the state of %s: %w", filter, err)
		}
		h, err := s.held(ctx, stream, msg, md.Sequence.Stream)
		if err != nil {
			return err
		}
		if !described && h.Kind == "" {
			if h.Kind, h.APIVersion, err = s.kindOf(ctx, stream, md.Sequence.Stream); err != nil {
				return err
			}
		}
		described = true
		if err := fn(h); err != nil {
			return err
		}
		if md.NumPending == 0 {
			return nil // caught up: fewer subjects than at the start (some expired)
		}
	}
	return nil
}

// kindOf reads the kind and apiVersion of the message at seq.
func (s *Sink) kindOf(ctx context.Context, stream jetstream.Stream, seq uint64) (string, string, error) {
	m, err := whole(ctx, stream, seq)
	if err != nil {
		return "", "", err
	}
	return m.Kind, m.APIVersion, nil
}

// whole reads the message at seq, its body too, and decodes it.
func whole(ctx context.Context, stream jetstream.Stream, seq uint64) (*wire.Message, error) {
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("nats sink: read message %d: %w", seq, err)
	}
	m, err := wire.NATS.Decode(raw.Data, wire.Headers(raw.Header))
	if err != nil {
		return nil, fmt.Errorf("nats sink: decode message %d on %s: %w", seq, raw.Subject, err)
	}
	return m, nil
}

// held reads what msg, the latest message of a subject delivered with
// headers only, says of its object; seq is its sequence in the stream.
func (s *Sink) held(ctx context.Context, stream jetstream.Stream, msg jetstream.Msg, seq uint64) (sink.Held, error) {
	hdr := msg.Headers()
	// Header values as encode writes them, percent-encoded (a value that
	// does not decode is read whole below).
	value := func(attr string) string {
		v, _, err := wire.NATS.HeaderValue(wire.Headers(hdr), attr)
		if err != nil {
			return ""
		}
		return v
	}
	h := sink.Held{UID: value("uid"), ResourceVersion: value("resourceversion"),
		Kind: value("kind"), APIVersion: value("apiversion"), View: hdr.Get(wire.NATS.ViewHeader())}
	// A delete carries the delete TTL; one written without it says so by
	// its type.
	h.Deleted = hdr.Get(jetstream.MsgTTLHeader) != "" || strings.HasSuffix(value("type"), "."+wire.ActionDeleted)
	ns, name, keyed := s.tmpl.ObjectOf(msg.Subject())
	if n, ok, err := wire.NATS.HeaderValue(wire.Headers(hdr), "name"); ok {
		if err != nil {
			return h, fmt.Errorf("nats sink: %s: %w", msg.Subject(), err)
		}
		name = n
		if ns, _, err = wire.NATS.HeaderValue(wire.Headers(hdr), "namespace"); err != nil {
			return h, fmt.Errorf("nats sink: %s: %w", msg.Subject(), err)
		}
		keyed = true
	}
	if keyed && h.UID != "" && h.ResourceVersion != "" {
		h.Namespace, h.Name = ns, name
		return h, nil
	}
	m, err := whole(ctx, stream, seq)
	if err != nil {
		return h, err
	}
	return sink.Held{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Deleted: h.Deleted || m.Action == wire.ActionDeleted, Kind: m.Kind, APIVersion: m.APIVersion, View: h.View}, nil
}

var _ sink.Witness = (*Sink)(nil)

// HoldsAny reports whether the stream holds a message of any of resources
// of cluster: the last message of each resource's subjects, looked up
// without a consumer. In core mode there is no stream, and it reports
// false.
func (s *Sink) HoldsAny(ctx context.Context, cluster string, resources []schema.GroupVersionResource, namespaces []string) (bool, error) {
	if s.js == nil {
		return false, nil
	}
	stream, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return false, fmt.Errorf("nats sink: stream %s: %w", s.cfg.Stream, err)
	}
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, res := range resources {
		for _, ns := range namespaces {
			filter, err := s.tmpl.Filter(cluster, res.GroupResource(), ns)
			if err != nil {
				return false, fmt.Errorf("nats sink: %w", err)
			}
			_, err = stream.GetLastMsgForSubject(ctx, filter)
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, jetstream.ErrMsgNotFound):
			default:
				return false, fmt.Errorf("nats sink: last message of %s: %w", filter, err)
			}
		}
	}
	return false, nil
}
