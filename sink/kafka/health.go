package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/sink"
)

// healthFresh is how long the outcome of the sink's last talk with the
// brokers (a produce request, or Health's own check) answers Health.
// Readiness probes come every 10 s by default and /metrics scrapes every
// 15 s or more: while the pipeline writes they cost no round trip, and an
// idle sink checks at most once per interval. A broker that stops
// answering an idle sink shows within this much of the next probe.
const healthFresh = 15 * time.Second

// health remembers how the sink's last talk with the brokers went, for
// Health. Its methods may be called concurrently.
type health struct {
	now func() time.Time // nil means time.Now; tests set a clock

	mu  sync.Mutex
	at  time.Time // when the last outcome came; zero before the first
	err error     // the last outcome: nil when the brokers answered

	checking sync.Mutex // held during an active check, so that one runs at a time
}

// Health is nil while the brokers answer, and says why not otherwise. It
// answers from the outcome of the last produce request when that is
// recent (healthFresh): a request that reached a broker, even one the
// broker refused, counts as an answer. Only a sink that has not written
// for that long sends a request of its own (ApiVersions, bounded by a few
// seconds), whose outcome then answers the probes that follow. A broker
// that recovers shows at the next successful write, or at the next check
// once the failure is that old.
func (s *Sink) Health() error {
	if err, ok := s.health.recent(); ok {
		return err
	}
	s.health.checking.Lock()
	defer s.health.checking.Unlock()
	if err, ok := s.health.recent(); ok {
		return err // a check that ran while this one waited
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	began := s.health.clock()
	_, err := s.client(healthTimeout).ApiVersions(ctx, &kafkago.ApiVersionsRequest{})
	return s.health.checked(began, s.brokersError(err))
}

// wrote records the outcomes errs of the records of a write sent with
// ctx: healthy when a broker answered any of them. An outcome that says
// nothing of the brokers is left out: the caller's ctx ended, or the
// producer refused a record before sending anything (too large, or
// closed). A record that found no partition leader to go to (a leader
// election) counts as a failure: no broker answered it.
func (s *Sink) wrote(ctx context.Context, errs []error) {
	if ctx.Err() != nil {
		return
	}
	var failed error
	for _, err := range errs {
		switch {
		case sink.IsTooLarge(err) || errors.Is(err, errProducerClosed):
		case answered(err):
			s.health.record(nil)
			return
		case failed == nil:
			failed = err
		}
	}
	if failed != nil {
		s.health.record(s.brokersError(failed))
	}
}

// answered reports whether the record that failed with err (or succeeded,
// when err is nil) reached a broker that answered it: it was written, or
// refused with one of Kafka's error codes. A Kafka error code the
// producer took from cached metadata to route the record (a
// *routeError) is no answer.
func answered(err error) bool {
	if err == nil {
		return true
	}
	var route *routeError
	if errors.As(err, &route) {
		return false
	}
	var code kafkago.Error
	return errors.As(err, &code)
}

// brokersError names the brokers in err, which it returns; nil stays nil.
func (s *Sink) brokersError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("kafka sink: brokers %s: %w", strings.Join(s.cfg.conn.Brokers(), ","), err)
}

// recent returns the last outcome, and whether it is recent enough to
// answer Health.
func (h *health) recent() (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err, !h.at.IsZero() && h.clock().Sub(h.at) < healthFresh
}

// record makes err the last outcome, and returns it.
func (h *health) record(err error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at, h.err = h.clock(), err
	return err
}

// checked records err, the outcome of a check that began at began, and
// returns the last outcome: a write's that came while the check ran is
// newer, and stays.
func (h *health) checked(began time.Time, err error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at.After(began) {
		return h.err
	}
	h.at, h.err = h.clock(), err
	return err
}

func (h *health) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}
