package source

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"
)

// Verb is what the source asked the API server for, as throttling is
// reported: VerbList or VerbWatch.
type Verb string

const (
	// VerbList is a list, Check's included.
	VerbList Verb = "list"
	// VerbWatch is a watch, one that streams a list included.
	VerbWatch Verb = "watch"
)

// ThrottleObserver is told of every answer 429 Too Many Requests to a list
// or watch of the source: the API server's Priority and Fairness refusing
// the call, or a proxy's limit. An Options.Observer that implements it is
// told, once per answer, as the transport sees it (see WrapTransport).
//
// A throttled call is retried, never given up on. client-go sends the
// request again after the answer's Retry-After, up to ten times within
// the call; each of those answers is told too. Should all of them be
// refused, the reflector retries the call with its backoff, and Check with
// its own (retryThrottled), for as long as the API server keeps refusing.
//
// Throttled may be called from any goroutine and must not block.
type ThrottleObserver interface {
	Throttled(res Resource, verb Verb)
}

// throttleLogInterval is how often at most the source logs that the API
// server throttles one resource's calls: its first refusal is logged at
// once, the next ones at most once a minute, with their count, so that a
// throttled start over hundreds of resources logs one line per resource
// rather than one per refusal.
const throttleLogInterval = time.Minute

// throttling tells the observer of each refused call, and logs them at a
// bounded rate, per resource.
type throttling struct {
	mu    sync.Mutex
	byRes map[string]*throttled
}

type throttled struct {
	n   atomic.Int64
	log rate.Sometimes
}

// of is the throttling state of the resource named name.
func (t *throttling) of(name string) *throttled {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byRes == nil {
		t.byRes = map[string]*throttled{}
	}
	th, ok := t.byRes[name]
	if !ok {
		th = &throttled{log: rate.Sometimes{First: 1, Interval: throttleLogInterval}}
		t.byRes[name] = th
	}
	return th
}

// newStream is the stream of one call to res: its transport counts and
// logs the answers 429 it gets.
func (s *Source) newStream(res Resource, verb Verb, ns string) *stream {
	return &stream{throttled: func(retryAfter string) { s.throttled(res, verb, ns, retryAfter) }}
}

// throttled records an answer 429 to a call to res in ns.
func (s *Source) throttled(res Resource, verb Verb, ns, retryAfter string) {
	if o, ok := s.opts.Observer.(ThrottleObserver); ok {
		o.Throttled(res, verb)
	}
	th := s.throttle.of(res.Name())
	n := th.n.Add(1)
	th.log.Do(func() {
		s.log.Warn("the API server throttles the bridge (429 Too Many Requests); retrying, logged at most once a minute per resource",
			"resource", res.Name(), "namespace", ns, "verb", verb, "retryAfter", retryAfter, "throttled", n)
	})
}

// retryThrottledMaxInterval is the longest wait between tries of a
// throttled start-up check: client-go has already waited out the
// Retry-After of ten refusals by then, and half a minute keeps a start
// that the API server throttles for long from adding to its load, while
// it still notices within half a minute that the throttling has ended.
const retryThrottledMaxInterval = 30 * time.Second

// retryThrottled calls f, and again with backoff while it fails with an
// answer 429 Too Many Requests, until ctx ends; it returns f's first
// other result.
func (s *Source) retryThrottled(ctx context.Context, res Resource, ns string, f func() error) error {
	b := backoff.NewExponentialBackOff()
	b.MaxElapsedTime = 0 // for as long as the API server throttles
	b.MaxInterval = retryThrottledMaxInterval
	return backoff.RetryNotify(func() error {
		err := f()
		if apierrors.IsTooManyRequests(err) {
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(b, ctx), func(err error, wait time.Duration) {
		s.log.Info("the start-up check was throttled by the API server; retrying",
			"resource", res.Name(), "namespace", ns, "in", wait.Round(time.Millisecond), "err", err)
	})
}
