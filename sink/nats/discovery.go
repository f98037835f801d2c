package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/wire"
)

var (
	_ sink.DiscoveryWriter    = (*Sink)(nil)
	_ sink.DiscoveryRefresher = (*Sink)(nil)
)

// DiscoveryRefresh is half the stream's maximum age (the history
// layout's BRIDGE_NATS_STREAM_MAX_AGE, as the existing stream has it), so
// that the stream always holds a document of the cluster; zero when the
// stream keeps messages for good (the state layout), and in core mode,
// where the server keeps nothing.
func (s *Sink) DiscoveryRefresh() time.Duration {
	if s.js == nil {
		return 0
	}
	return s.streamMaxAge / 2
}

// WriteDiscovery publishes d to wire.DiscoverySubject(BRIDGE_NATS_SUBJECT_PREFIX,
// d.Cluster), with the header Content-Type wire.DiscoveryContentType, and
// returns once the stream acknowledged it (in core mode, once the server
// has it). The subject is one of its own, so the state layout's stream,
// one message per subject, keeps the latest document of each cluster; the
// history layout's keeps every document for BRIDGE_NATS_STREAM_MAX_AGE
// (the bridge publishes its document again, unchanged, at half that age:
// see DiscoveryRefresh). A stream that does not capture the subject (one made by
// hand with narrower subjects) fails it terminally, naming the stream and
// the subject.
func (s *Sink) WriteDiscovery(ctx context.Context, d wire.Discovery) error {
	data, err := wire.MarshalDiscovery(d)
	if err != nil {
		return sink.Terminal(fmt.Errorf("nats sink: %w", err))
	}
	subject := wire.DiscoverySubject(s.cfg.SubjectPrefix, d.Cluster)
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{"Content-Type": []string{wire.DiscoveryContentType}}}
	if s.js == nil {
		if err := s.nc.PublishMsg(m); err != nil {
			return publishError(subject, err)
		}
		fctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
		defer cancel()
		if err := s.nc.FlushWithContext(fctx); err != nil {
			return fmt.Errorf("nats sink: flush the discovery document: %w", err)
		}
		return nil
	}
	if s.discoveryErr != nil {
		return s.discoveryErr
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	if _, err := s.js.PublishMsg(pctx, m, jetstream.WithExpectStream(s.cfg.Stream), jetstream.WithRetryAttempts(0)); err != nil {
		return publishError(subject, err)
	}
	return nil
}

// checkDiscoverySubject is nil when the stream's subjects capture the
// discovery subject of the sink's prefix, and the terminal error of
// WriteDiscovery otherwise.
func (s *Sink) checkDiscoverySubject(subjects []string) error {
	subject := wire.DiscoverySubject(s.cfg.SubjectPrefix, "x")
	if slices.ContainsFunc(subjects, func(p string) bool { return wire.SubjectMatches(p, subject) }) {
		return nil
	}
	return sink.Terminal(fmt.Errorf("nats sink: stream %s captures %s, not the discovery documents' subjects %s: add that subject to the stream",
		s.cfg.Stream, strings.Join(subjects, ", "), wire.DiscoverySubjects(s.cfg.SubjectPrefix)))
}

// LastDiscovery returns the latest discovery document of cluster in the
// stream; false when the stream holds none, and always in core mode.
func (s *Sink) LastDiscovery(ctx context.Context, cluster string) (wire.Discovery, bool, error) {
	if s.js == nil || s.discoveryErr != nil {
		return wire.Discovery{}, false, nil
	}
	subject := wire.DiscoverySubject(s.cfg.SubjectPrefix, cluster)
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return wire.Discovery{}, false, fmt.Errorf("nats sink: stream %s: %w", s.cfg.Stream, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return wire.Discovery{}, false, nil
	}
	if err != nil {
		return wire.Discovery{}, false, fmt.Errorf("nats sink: last message of %s: %w", subject, err)
	}
	d, err := wire.UnmarshalDiscovery(m.Data)
	if err != nil {
		return wire.Discovery{}, false, fmt.Errorf("nats sink: %s: %w", subject, err)
	}
	return d, true, nil
}
