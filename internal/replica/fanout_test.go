package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/internal/replica/access"
	"github.com/kubebus/bridge/internal/replica/cache"
)

// The watch fan-out, in process: one cache of ConfigMaps, N watches
// served by the API server's own watch handler (negotiation, the
// embedded encoder, the WatchEvent framing), each writing to a response
// that discards what it is sent. What a change costs the server per
// watcher, without TLS and without a client.

// fanoutObjects and fanoutDataSize shape the cache: 1,000 ConfigMaps of
// 2 KiB of data.
const (
	fanoutObjects  = 1000
	fanoutDataSize = 2 << 10
)

// fanoutRules: the benchmark serves its storages directly, after
// authorization; the Server needs rules all the same.
const fanoutRules = `apiVersion: replica.kubebus.io/v1
kind: AccessRules
grants:
- subjects: [{kind: User, name: nobody}]
  clusters: [one]
  rules:
  - {apiGroups: [""], resources: [configmaps], verbs: [get]}
`

// fanoutServer is a Server whose caches the caller makes and feeds.
func fanoutServer(tb testing.TB) *Server {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(fanoutRules), 0o600); err != nil {
		tb.Fatal(err)
	}
	rules, err := access.NewRulesFile(access.RulesFileConfig{Path: path})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(Config{
		Discovery: testDiscovery(nil),
		NewListerWatcher: func(string, schema.GroupResource) (clientcache.ListerWatcher, error) {
			return nil, errors.New("the caller feeds its caches")
		},
		Authenticator: bearertoken.New(tokenfile.New(map[string]*user.DefaultInfo{})),
		Rules:         rules,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// fanoutConfigMap is ConfigMap ns/cm-<i> at position p<pos>, with data
// (shared, never changed).
func fanoutConfigMap(i, pos int, data map[string]any) *unstructured.Unstructured {
	name := fmt.Sprintf("cm-%d", i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"namespace": "ns", "name": name, "uid": "uid-" + name,
			"resourceVersion":   fmt.Sprintf("p%d", pos),
			"creationTimestamp": "2020-01-01T00:00:00Z",
			"annotations":       map[string]any{"kubebus.io/resource-version": fmt.Sprint(pos)},
			"labels":            map[string]any{"app": "bench"},
		},
		"data": data,
	}}
}

func fanoutData() map[string]any {
	return map[string]any{"payload": strings.Repeat("x", fanoutDataSize)}
}

// fanoutStart is the position a benchmark's watches start from.
const fanoutStart = "p0.start"

// fanoutStore is a synced cache of fanoutObjects ConfigMaps at p0, then
// at fanoutStart.
func fanoutStore(tb testing.TB, data map[string]any) *cache.Store {
	tb.Helper()
	store := cache.NewStore(cache.Options{})
	list := make([]any, fanoutObjects)
	for i := range list {
		list[i] = fanoutConfigMap(i, 0, data)
	}
	if err := store.Replace(list, "p0"); err != nil {
		tb.Fatal(err)
	}
	// A watch from the relist's position p0 is sent its changes again; one
	// from this bookmark is sent the changes after it alone.
	if err := store.Bookmark(fanoutStart); err != nil {
		tb.Fatal(err)
	}
	return store
}

// frameWriter is the response of one watch: it keeps (when keep is set)
// or discards each frame written, counts frames on frames, and marks the
// start of the stream on started.
type frameWriter struct {
	header  http.Header
	started func()
	frame   func(b []byte)
	once    sync.Once
}

func (w *frameWriter) Header() http.Header { return w.header }

func (w *frameWriter) WriteHeader(code int) {
	w.once.Do(w.started)
}

func (w *frameWriter) Write(b []byte) (int, error) {
	w.once.Do(w.started)
	w.frame(b)
	return len(b), nil
}

func (w *frameWriter) Flush() {}

// serveWatch serves, until ctx ends, the watch of query on st with the
// Accept header accept, through the API server's handlers, to w. It
// returns once the handler returned.
func serveWatch(ctx context.Context, s *Server, st *storage, query, accept string, w *frameWriter) {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/namespaces/ns/configmaps?"+query, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	info, err := requestInfo.NewRequestInfo(r)
	if err != nil {
		panic(err)
	}
	r = r.WithContext(request.WithRequestInfo(request.WithNamespace(ctx, info.Namespace), info))
	s.serveResource(w, r, st, st.res, info)
}

// BenchmarkWatchFanout is the cost of one change to the server, per
// watcher, for N watchers of one resource: ns/event/watcher is the wall
// time of a change's fan-out to all of them divided by N (on the
// machine's cores, all busy), B/event/watcher and allocs/event/watcher
// what the process allocated for it.
func BenchmarkWatchFanout(b *testing.B) {
	for _, n := range []int{1, 50, 500} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
}

// fanoutBatch is how many changes the benchmark makes before it waits for
// every watcher to have written them: well within a watcher's queue, so
// that no watcher is cut.
const fanoutBatch = 256

func benchFanout(b *testing.B, n int) {
	s := fanoutServer(b)
	data := fanoutData()
	store := fanoutStore(b, data)
	st := &storage{s: s, cluster: "one", res: cmResource, store: store, table: newTableConvertor(cmResource, false)}

	var remaining, wire atomic.Int64
	written := make(chan struct{}, 1)
	frame := func(p []byte) {
		wire.Add(int64(len(p)))
		if remaining.Add(-1) == 0 {
			written <- struct{}{}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var started, served sync.WaitGroup
	for range n {
		started.Add(1)
		served.Add(1)
		w := &frameWriter{header: http.Header{}, started: started.Done, frame: frame}
		go func() {
			defer served.Done()
			serveWatch(ctx, s, st, "watch=1&resourceVersion="+fanoutStart, "", w)
		}()
	}
	started.Wait()
	defer func() { cancel(); served.Wait() }()

	// The changes, made before the clock starts: each a new state of one
	// of the objects, at the next position.
	changes := make([]*unstructured.Unstructured, b.N)
	for i := range changes {
		changes[i] = fanoutConfigMap(i%fanoutObjects, i+1, data)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		batch := min(fanoutBatch, b.N-done)
		remaining.Store(int64(batch * n))
		for _, u := range changes[done : done+batch] {
			if err := store.Update(u); err != nil {
				b.Fatal(err)
			}
		}
		<-written
		done += batch
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	per := float64(b.N) * float64(n)
	b.ReportMetric(float64(elapsed.Nanoseconds())/per, "ns/event/watcher")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/per, "B/event/watcher")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/per, "allocs/event/watcher")
	b.ReportMetric(float64(wire.Load())/per, "wireB/event")
	if store.Watchers() != n {
		b.Fatalf("%d watchers left of %d: some were cut", store.Watchers(), n)
	}
}

// A change encoded once and shared is what each watcher would have been
// sent alone: watchers of one cache, in JSON and as Tables, with and
// without a selector (one change is MODIFIED to one, DELETED to another),
// one that starts late (its first Table has headers, the others' second
// has none), each get the frames that the same watch, alone on a cache
// fed the same changes (so that nothing is shared), gets, byte for byte.
func TestSharedEncodingsPerWatcher(t *testing.T) {
	const table = "application/json;as=Table;v=v1;g=meta.k8s.io"
	watches := []struct {
		name, query, accept string
		late                bool // starts after the first change
		frames              int
	}{
		{name: "json", query: "watch=1", frames: 4},
		{name: "json again", query: "watch=1", frames: 4},
		{name: "json selected", query: "watch=1&labelSelector=app%3Dbench", frames: 4},
		{name: "table", query: "watch=1", accept: table, frames: 4},
		{name: "table late", query: "watch=1", accept: table, late: true, frames: 3},
	}
	data := map[string]any{"k": "v"}
	moved := fanoutConfigMap(1, 3, data)
	moved.SetLabels(map[string]string{"app": "other"})
	changes := []func(*cache.Store) error{
		func(s *cache.Store) error { return s.Update(fanoutConfigMap(0, 1, data)) },
		func(s *cache.Store) error { return s.Add(fanoutConfigMap(fanoutObjects, 2, data)) },
		func(s *cache.Store) error { return s.Update(moved) },
		func(s *cache.Store) error { return s.Delete(fanoutConfigMap(2, 4, data)) },
	}
	// run serves the watches picked on one cache fed changes, and returns
	// each one's frames.
	run := func(picked ...int) [][][]byte {
		t.Helper()
		s := fanoutServer(t)
		store := fanoutStore(t, data)
		st := &storage{s: s, cluster: "one", res: cmResource, store: store, table: newTableConvertor(cmResource, false)}
		ctx, cancel := context.WithCancel(t.Context())
		var served sync.WaitGroup
		defer func() { cancel(); served.Wait() }()
		frames := make([][][]byte, len(picked))
		var mu sync.Mutex
		var complete sync.WaitGroup
		start := func(late bool) {
			for i, k := range picked {
				if watches[k].late != late {
					continue
				}
				started := make(chan struct{})
				complete.Add(1)
				w := &frameWriter{header: http.Header{}, started: func() { close(started) }, frame: func(b []byte) {
					mu.Lock()
					defer mu.Unlock()
					frames[i] = append(frames[i], bytes.Clone(b))
					if len(frames[i]) == watches[k].frames {
						complete.Done()
					}
				}}
				from := fanoutStart
				if late {
					from = "p1"
				}
				served.Add(1)
				go func() {
					defer served.Done()
					serveWatch(ctx, s, st, watches[k].query+"&resourceVersion="+from, watches[k].accept, w)
				}()
				<-started
			}
		}
		start(false)
		for i, change := range changes {
			if err := change(store); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				start(true)
			}
		}
		all := make(chan struct{})
		go func() { complete.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("frames after 10 s: %d", frames)
		}
		mu.Lock()
		defer mu.Unlock()
		return frames
	}

	picked := make([]int, len(watches))
	for k := range watches {
		picked[k] = k
	}
	shared := run(picked...)
	for k, w := range watches {
		alone := run(k)[0]
		for i := range alone {
			if !bytes.Equal(shared[k][i], alone[i]) {
				t.Errorf("%s, frame %d:\nshared %s\nalone  %s", w.name, i, shared[k][i], alone[i])
			}
		}
		if len(shared[k]) != len(alone) {
			t.Errorf("%s: %d frames shared, %d alone", w.name, len(shared[k]), len(alone))
		}
	}
	// The watches differ where they should: the test would not see an
	// encoding shared where it must not be.
	if !strings.Contains(string(shared[2][2]), `"type":"DELETED"`) || !strings.Contains(string(shared[0][2]), `"type":"MODIFIED"`) {
		t.Errorf("the moved object: %s to the selected watch, %s to the other", shared[2][2], shared[0][2])
	}
	if !strings.Contains(string(shared[4][0]), `"columnDefinitions":[{`) || strings.Contains(string(shared[3][1]), `"columnDefinitions":[{`) {
		t.Errorf("change 2: %s to the late Table watch, %s to the other", shared[4][0], shared[3][1])
	}
}
