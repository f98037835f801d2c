package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// runFor runs a Source of configmaps in ns against srv for d, with the
// stall timeout and list patience given, and reports whether it synced,
// how many calls were cut or failed, and whether Healthy was ever non-nil.
func runFor(t *testing.T, srv *httptest.Server, stall, patience, d time.Duration) (synced bool, cuts int64, everUnhealthy bool) {
	t.Helper()
	client, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, WrapTransport: WrapTransport})
	if err != nil {
		t.Fatal(err)
	}
	obs := &watchErrorCount{}
	src := New(client, Options{Resources: []Resource{configmaps}, Namespaces: []string{"ns"}, Observer: obs, StallTimeout: stall},
		emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	src.health[watchKey{configmaps.Name(), "ns"}].listPatience = patience
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for ctx.Err() == nil {
		select {
		case <-src.Synced():
			synced = true
		case <-tk.C:
		case <-ctx.Done():
		}
		if src.Healthy() != nil {
			everUnhealthy = true
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	return synced, obs.n.Load(), everUnhealthy
}

// silentWatches serves lists at once (and refuses to stream them), and
// answers every watch with a bare 200 and nothing after it, ended as end
// says, given the watch's timeoutSeconds.
func silentWatches(end func(w http.ResponseWriter, r *http.Request, timeout time.Duration)) *httptest.Server {
	lists := &slowListServer{firstList: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, emptyList) }}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
			lists.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
		end(w, r, time.Duration(timeout)*time.Second)
	}))
}

// Every watch is answered 200 and then nothing, and its connection is
// dropped (no end of the body) just after its timeoutSeconds, as a proxy
// with a read timeout does in front of an API server whose watches are
// stuck. No watch delivers anything: a dropped watch is no clean end, and
// the source reports it within the stall timeout.
func TestHealthDroppedSilentWatchIsNotClean(t *testing.T) {
	srv := silentWatches(func(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
		select {
		case <-r.Context().Done():
		case <-time.After(timeout + 300*time.Millisecond):
		}
		panic(http.ErrAbortHandler) // drop the connection
	})
	defer srv.Close()
	const stall = 4 * time.Second // watches get timeoutSeconds=2
	synced, cuts, unhealthy := runFor(t, srv, stall, time.Second, 5*stall)
	if !synced {
		t.Fatal("never synced")
	}
	if !unhealthy {
		t.Errorf("for %s (%d stall timeouts) no watch delivered anything, yet never unhealthy (%d cuts)", 5*stall, 5, cuts)
	}
}

// A working watch path in a quiet namespace, behind something that ends
// every watch cleanly well before its timeout (a proxy's idle timeout
// shorter than half the stall timeout, or an API server ending watches
// early). Each clean end is the API server saying the watch worked: the
// source never reports a stall.
func TestHealthEarlyCleanEndsAreHealthy(t *testing.T) {
	srv := silentWatches(func(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
		select {
		case <-r.Context().Done():
		case <-time.After(timeout / 2):
		}
		// Returning ends the body cleanly, with its terminating chunk.
	})
	defer srv.Close()
	const stall = 8 * time.Second // timeoutSeconds=4, ended at 2s
	_, cuts, unhealthy := runFor(t, srv, stall, time.Second, 3*stall)
	if unhealthy {
		t.Errorf("watches that open and end cleanly every 2s were reported stalled (%d cuts)", cuts)
	}
}

// The answer's headers come, then its body stops midway for good (a proxy
// that stops forwarding mid-list). The list makes no progress for the list
// patience: it is cut and retried.
func TestHealthListWhoseBodyStallsIsCut(t *testing.T) {
	srv := httptest.NewServer(&slowListServer{firstList: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"kind":"ConfigMapList",`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}})
	defer srv.Close()
	synced, cuts, _ := runFor(t, srv, 2*time.Second, time.Second, 10*time.Second)
	if !synced || cuts == 0 {
		t.Errorf("after 10s (patience 1s): synced %v, %d calls cut; want the stalled list cut and retried", synced, cuts)
	}
}

// The first answer to a list is 429 with Retry-After (API Priority and
// Fairness); client-go retries within the same List call, and the retry
// is never answered. The 429 was progress of the first attempt only: the
// retry is cut after the list patience.
func TestHealthHungRetryAfter429IsCut(t *testing.T) {
	var n atomic.Int64
	lists := &slowListServer{firstList: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, emptyList) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "" {
			switch n.Add(1) {
			case 1:
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`)
				return
			case 2:
				<-r.Context().Done() // the retry: no answer at all
				return
			}
		}
		lists.ServeHTTP(w, r)
	}))
	defer srv.Close()
	synced, cuts, _ := runFor(t, srv, 2*time.Second, time.Second, 10*time.Second)
	if !synced || cuts == 0 {
		t.Errorf("after 10s (patience 1s): synced %v, %d calls cut, %d list requests; want the hung retry cut", synced, cuts, n.Load())
	}
}
