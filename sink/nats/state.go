package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/sink"
)

var _ sink.StateReader = (*Sink)(nil)

// Identity headers: in the state layout, a structured-mode message also
// carries its object's uid and resourceVersion as headers, under the
// names binary mode gives them, so that what the stream holds can be
// read with headers only. The Content-Type of structured mode still tells
// the modes apart, for Decode and for the CloudEvents binding's
// receivers.
const (
	uidHeader             = HeaderPrefix + "uid"
	resourceVersionHeader = HeaderPrefix + "resourceversion"
	typeHeader            = HeaderPrefix + "type"
	// ViewHeader carries, in the state layout, the object's state in the
	// bridge's view (sink.Message.View), when it has one.
	ViewHeader = "Bridge-View"
)

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
	filters := []string{s.tmpl.stateFilter(cluster, resource, "")}
	if len(namespaces) > 0 {
		filters = filters[:0]
		for _, ns := range namespaces {
			filters = append(filters, s.tmpl.stateFilter(cluster, resource, ns))
		}
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
func whole(ctx context.Context, stream jetstream.Stream, seq uint64) (*sink.Message, error) {
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("nats sink: read message %d: %w", seq, err)
	}
	return Decode(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data})
}

// held reads what msg, the latest message of a subject delivered with
// headers only, says of its object; seq is its sequence in the stream.
func (s *Sink) held(ctx context.Context, stream jetstream.Stream, msg jetstream.Msg, seq uint64) (sink.Held, error) {
	hdr := msg.Headers()
	// Header values as encode writes them: percent-encoded, as the
	// binding asks (a value that does not decode is read whole below).
	value := func(name string) string {
		v, err := percentDecode(hdr.Get(name))
		if err != nil {
			return ""
		}
		return v
	}
	h := sink.Held{UID: value(uidHeader), ResourceVersion: value(resourceVersionHeader),
		Kind: value(HeaderPrefix + "kind"), APIVersion: value(HeaderPrefix + "apiversion"), View: hdr.Get(ViewHeader)}
	// A delete carries the delete TTL; one written without it says so by
	// its type.
	h.Deleted = hdr.Get(jetstream.MsgTTLHeader) != "" || strings.HasSuffix(hdr.Get(typeHeader), "."+actionDeleted)
	ns, name, keyed := s.tmpl.objectOf(msg.Subject())
	if hdr.Get(HeaderPrefix+"name") != "" {
		var err error
		if name, err = percentDecode(hdr.Get(HeaderPrefix + "name")); err != nil {
			return h, fmt.Errorf("nats sink: %s: header %sname: %w", msg.Subject(), HeaderPrefix, err)
		}
		if ns, err = percentDecode(hdr.Get(HeaderPrefix + "namespace")); err != nil {
			return h, fmt.Errorf("nats sink: %s: header %snamespace: %w", msg.Subject(), HeaderPrefix, err)
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
		Deleted: h.Deleted || m.Action == actionDeleted, Kind: m.Kind, APIVersion: m.APIVersion, View: h.View}, nil
}

// stateFilter is the subject filter of every object of resource in
// cluster, in namespace unless it is "": the subject of the state layout
// with "*" for what differs from object to object.
func (t *Template) stateFilter(cluster string, resource schema.GroupVersionResource, namespace string) string {
	toks := make([]string, len(t.parts))
	for i, p := range t.parts {
		switch p.f {
		case literal:
			toks[i] = p.lit
		case fieldCluster:
			toks[i] = EscapeToken(cluster)
		case fieldGroup:
			toks[i] = CoreGroupToken
			if resource.Group != "" {
				toks[i] = EscapeToken(resource.Group)
			}
		case fieldResource:
			toks[i] = EscapeToken(resource.Resource)
		case fieldNamespace:
			toks[i] = "*"
			if namespace != "" {
				toks[i] = EscapeToken(namespace)
			}
		default:
			toks[i] = "*"
		}
	}
	return strings.Join(toks, ".")
}

// objectOf reads the namespace and name of a subject of the template; ok
// is false when either cannot be read back (a bounded token).
func (t *Template) objectOf(subject string) (namespace, name string, ok bool) {
	toks := strings.Split(subject, ".")
	if len(toks) != len(t.parts) {
		return "", "", false
	}
	var haveNS, haveName bool
	for i, p := range t.parts {
		var err error
		switch p.f {
		case fieldNamespace:
			if toks[i] == ClusterScopedToken {
				namespace, haveNS = "", true
				continue
			}
			namespace, err = UnescapeToken(toks[i])
			haveNS = err == nil
		case fieldName:
			name, err = UnescapeToken(toks[i])
			haveName = err == nil
		}
	}
	return namespace, name, haveNS && haveName
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
			filter := s.tmpl.stateFilter(cluster, res, ns)
			_, err := stream.GetLastMsgForSubject(ctx, filter)
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
