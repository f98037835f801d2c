package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/kubebus/bridge/test/logtest"
)

// tooManyRequests is the body API Priority and Fairness answers a refused
// call with.
const tooManyRequests = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`

// throttlingServer answers the first lists and watches of configmaps 429,
// as API Priority and Fairness does, then serves an empty list, and
// watches that stay open, silent, until their timeoutSeconds.
type throttlingServer struct {
	// refuseLists and refuseWatches are how many of each to refuse.
	refuseLists, refuseWatches int64
	// retryAfter is the refusals' Retry-After header; "" sends none, and
	// client-go then does not retry within the call.
	retryAfter string
	// otherwise, when set, answers the lists that are not refused.
	otherwise func(w http.ResponseWriter)

	lists, watches atomic.Int64 // requests seen
}

func (s *throttlingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	watching := q.Get("watch") == "true"
	// Streaming lists are refused as an API server without them does, so
	// that the reflector lists.
	if watching && q.Get("sendInitialEvents") == "true" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422}`)
		return
	}
	var n, refuse int64
	if watching {
		n, refuse = s.watches.Add(1), s.refuseWatches
	} else {
		n, refuse = s.lists.Add(1), s.refuseLists
	}
	if n <= refuse {
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, tooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if !watching {
		if s.otherwise != nil {
			s.otherwise(w)
			return
		}
		fmt.Fprint(w, emptyList)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-time.After(time.Second):
	}
}

// throttleCount counts the throttled calls it is told of, by verb.
type throttleCount struct {
	noObserver
	mu     sync.Mutex
	byVerb map[Verb]int
}

var _ ThrottleObserver = (*throttleCount)(nil)

func (o *throttleCount) Throttled(res Resource, verb Verb) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byVerb == nil {
		o.byVerb = map[Verb]int{}
	}
	o.byVerb[verb]++
}

func (o *throttleCount) of(verb Verb) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byVerb[verb]
}

// throttledSource is a Source of configmaps in ns against srv, on the path
// given, whose log is written to the returned buffer.
func throttledSource(t *testing.T, srv *httptest.Server, path Path, obs Observer) (*Source, *logtest.Buffer) {
	t.Helper()
	opts := Options{Resources: []Resource{configmaps}, Namespaces: []string{"ns"}, Observer: obs}
	logs := &logtest.Buffer{}
	cfg := &rest.Config{Host: srv.URL, WrapTransport: WrapTransport}
	return sourceOn(t, cfg, path, opts, slog.New(slog.NewTextHandler(logs, nil))), logs
}

// throttleLogLines counts the log lines that say the API server throttles.
func throttleLogLines(logs string) int {
	return strings.Count(logs, "the API server throttles the bridge")
}

// Check does not turn throttling into a failed start: refusals with a
// Retry-After are retried by client-go within the call, those without one
// (client-go gives up on them at once) by Check, with backoff, and every
// one of them is counted, by verb; the throttling is logged once.
func TestCheckRetriesWhileThrottled(t *testing.T) {
	for _, path := range []Path{PathRaw, PathParsed} {
		for _, tc := range []struct {
			name       string
			retryAfter string
			// lists is how many lists are sent: a watch refused for
			// good within its call has Check list again.
			lists int64
		}{
			{"with Retry-After", "0", 3},
			{"without Retry-After", "", 4},
		} {
			t.Run(fmt.Sprintf("%s %s", path, tc.name), func(t *testing.T) {
				t.Parallel()
				ts := &throttlingServer{refuseLists: 2, refuseWatches: 1, retryAfter: tc.retryAfter}
				srv := httptest.NewServer(ts)
				defer srv.Close()
				obs := &throttleCount{}
				src, logs := throttledSource(t, srv, path, obs)
				if err := src.Check(t.Context()); err != nil {
					t.Fatalf("Check: %v", err)
				}
				if got := obs.of(VerbList); got != 2 {
					t.Errorf("throttled lists counted %d, want 2", got)
				}
				if got := obs.of(VerbWatch); got != 1 {
					t.Errorf("throttled watches counted %d, want 1", got)
				}
				if got, want := ts.lists.Load(), tc.lists; got != want {
					t.Errorf("lists sent %d, want %d", got, want)
				}
				if got := throttleLogLines(logs.String()); got != 1 {
					t.Errorf("throttling logged %d times, want once:\n%s", got, logs)
				}
			})
		}
	}
}

// Only throttling is retried: any other refusal fails Check at once, with
// one list sent.
func TestCheckDoesNotRetryOtherErrors(t *testing.T) {
	var lists atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lists.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
	}))
	defer srv.Close()
	src, _ := throttledSource(t, srv, PathRaw, &throttleCount{})
	err := src.Check(t.Context())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Check = %v, want Forbidden", err)
	}
	if got := lists.Load(); got != 1 {
		t.Errorf("lists sent %d, want 1", got)
	}
}

// A start that the API server throttles for good waits, and gives up only
// when its context ends.
func TestCheckThrottledUntilContextEnds(t *testing.T) {
	t.Parallel()
	ts := &throttlingServer{refuseLists: 1 << 40}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	obs := &throttleCount{}
	src, logs := throttledSource(t, srv, PathRaw, obs)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err := src.Check(ctx)
	if !errors.Is(err, context.DeadlineExceeded) && !apierrors.IsTooManyRequests(err) {
		t.Errorf("Check = %v, want the end of its context or the last refusal", err)
	}
	if ctx.Err() == nil {
		t.Errorf("Check returned before its context ended: %v", err)
	}
	if got := obs.of(VerbList); got < 2 {
		t.Errorf("throttled lists counted %d, want at least 2 (retried)", got)
	}
	if got := throttleLogLines(logs.String()); got != 1 {
		t.Errorf("throttling logged %d times, want once:\n%s", got, logs)
	}
}

// The reflectors' lists and watches are counted too, and the source
// syncs once the API server lets them through.
func TestRunCountsThrottledCalls(t *testing.T) {
	for _, path := range []Path{PathRaw, PathParsed} {
		t.Run(string(path), func(t *testing.T) {
			ts := &throttlingServer{refuseLists: 2, refuseWatches: 1, retryAfter: "0"}
			srv := httptest.NewServer(ts)
			defer srv.Close()
			obs := &throttleCount{}
			src, logs := throttledSource(t, srv, path, obs)
			ctx, cancel := context.WithCancel(t.Context())
			done := startSynced(t, ctx, cancel, src, 30*time.Second, "the throttled calls were not retried")
			deadline := time.Now().Add(30 * time.Second)
			for obs.of(VerbWatch) < 1 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			if got := obs.of(VerbList); got != 2 {
				t.Errorf("throttled lists counted %d, want 2", got)
			}
			if got := obs.of(VerbWatch); got != 1 {
				t.Errorf("throttled watches counted %d, want 1", got)
			}
			if got := throttleLogLines(logs.String()); got != 1 {
				t.Errorf("throttling logged %d times, want once:\n%s", got, logs)
			}
		})
	}
}

// Answers other than 429 are not counted as throttling, and a source
// whose observer does not count throttling still works.
func TestThrottledNeedsA429(t *testing.T) {
	srv := httptest.NewServer(&throttlingServer{})
	defer srv.Close()
	obs := &throttleCount{}
	src, logs := throttledSource(t, srv, PathRaw, obs)
	if err := src.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := obs.of(VerbList) + obs.of(VerbWatch); got != 0 {
		t.Errorf("counted %d throttled calls, want 0", got)
	}
	if got := throttleLogLines(logs.String()); got != 0 {
		t.Errorf("throttling logged %d times:\n%s", got, logs)
	}

	ts := &throttlingServer{refuseLists: 1, retryAfter: "0"}
	srv2 := httptest.NewServer(ts)
	defer srv2.Close()
	plain, _ := throttledSource(t, srv2, PathRaw, noObserver{})
	if err := plain.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}
