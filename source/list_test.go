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

// slowListServer is an API server, over HTTP, for the ConfigMaps of
// namespace ns. It refuses to stream lists as watches, so the reflector
// lists. The first list is answered as the test says; later ones at once.
// Watches send nothing and end at their timeout.
type slowListServer struct {
	// firstList answers the first list: it may send nothing, or its body
	// slowly.
	firstList func(w http.ResponseWriter, r *http.Request)
	lists     atomic.Int64
}

const emptyList = `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[]}`

func (s *slowListServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400,"message":"sendInitialEvents is not supported"}`)
	case q.Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
		select {
		case <-r.Context().Done():
		case <-time.After(time.Duration(timeout) * time.Second):
		}
	case s.lists.Add(1) == 1:
		s.firstList(w, r)
	default:
		fmt.Fprint(w, emptyList)
	}
}

// runAgainst runs a Source of configmaps in ns against srv, with the
// stall timeout and list patience given, until it has synced or ctx ends.
func runAgainst(t *testing.T, srv *httptest.Server, stall, patience time.Duration) (synced bool, cuts int64) {
	t.Helper()
	client, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, WrapTransport: WrapTransport})
	if err != nil {
		t.Fatal(err)
	}
	obs := &watchErrorCount{}
	src := New(client, Options{Resources: []Resource{configmaps}, Namespaces: []string{"ns"}, Observer: obs, StallTimeout: stall},
		emptyLoader{}, HandlerFunc(func(Delta) {}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	src.health[watchKey{configmaps.Name(), "ns"}].listPatience = patience
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	select {
	case <-src.Synced():
		synced = true
	case <-ctx.Done():
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	return synced, obs.n.Load()
}

// A list whose answer has begun is never cut, however long the rest
// takes: a large list, over a slow link, is not cut again and again.
func TestSlowListIsNotCut(t *testing.T) {
	const stall, patience = 2 * time.Second, time.Second
	srv := httptest.NewServer(&slowListServer{firstList: func(w http.ResponseWriter, r *http.Request) {
		// The headers at once, then the body over three list
		// patiences, in JSON whitespace.
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1",`)
		w.(http.Flusher).Flush()
		for range 12 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			fmt.Fprint(w, "  ")
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, `"metadata":{"resourceVersion":"10"},"items":[]}`)
	}})
	defer srv.Close()
	start := time.Now()
	synced, cuts := runAgainst(t, srv, stall, patience)
	if !synced || cuts != 0 {
		t.Errorf("synced %v with %d calls cut, want synced with none cut", synced, cuts)
	}
	t.Logf("synced after %s, the first list taking 3s", time.Since(start).Round(time.Millisecond))
}

// A list the API server never answers, over a real connection, is cut
// after the list patience; the list tried again is answered.
func TestUnansweredListIsCut(t *testing.T) {
	const stall, patience = 2 * time.Second, time.Second
	srv := httptest.NewServer(&slowListServer{firstList: func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // nothing, not even the headers
	}})
	defer srv.Close()
	start := time.Now()
	synced, cuts := runAgainst(t, srv, stall, patience)
	if !synced || cuts != 1 {
		t.Errorf("synced %v with %d calls cut, want synced after one cut", synced, cuts)
	}
	t.Logf("synced after %s, with %d list cut", time.Since(start).Round(time.Millisecond), cuts)
}
