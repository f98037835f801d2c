package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/rawobject"
)

// cmJSON is a ConfigMap of namespace ns as the API server writes it, with
// managedFields, escapes and non-ASCII text.
func cmJSON(name, uid, rv string) string {
	return `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"ns","uid":"` + uid +
		`","resourceVersion":"` + rv + `","managedFields":[{"manager":"kubectl","operation":"Apply"}]},"data":{"k":"caf\u00e9 \"x\" ` + "é" + `","n":"1e400"}}`
}

func event(typ, obj string) string { return `{"type":"` + typ + `","object":` + obj + "}\n" }

const bookmarkEnd = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}`

func rawClientFor(t *testing.T, srv *httptest.Server) (*rest.RESTClient, rawClient) {
	t.Helper()
	rc, err := NewRESTClient(&rest.Config{Host: srv.URL, WrapTransport: WrapTransport})
	if err != nil {
		t.Fatal(err)
	}
	return rc, rawClient{rest: rc, res: configmaps, ns: "ns"}
}

// rawWatchOf is the raw client's watch of an API server that answers with
// body, stopped when the test ends.
func rawWatchOf(t *testing.T, body string) watch.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	_, c := rawClientFor(t, srv)
	w, err := c.Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// The raw client's list holds each item as the API server sent it, with
// its identity, and the list's resourceVersion and continue token.
func TestRawListHandsOnItemsAsSent(t *testing.T) {
	a, b := cmJSON("a", "ua", "1"), cmJSON("b", "ub", "2")
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"next"},"items":[`+a+",\n"+b+"]}\n")
	}))
	defer srv.Close()
	_, c := rawClientFor(t, srv)
	obj, err := c.List(t.Context(), metav1.ListOptions{LabelSelector: "x=y", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/api/v1/namespaces/ns/configmaps?labelSelector=x%3Dy&limit=2"; path != want {
		t.Errorf("requested %s, want %s", path, want)
	}
	l := obj.(*rawList)
	if l.ResourceVersion != "7" || l.Continue != "next" || len(l.Items) != 2 {
		t.Fatalf("list at %q, continue %q, %d items; want 7, next, 2", l.ResourceVersion, l.Continue, len(l.Items))
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []string{a, b} {
		o := items[k].(*rawObject)
		if string(o.raw.Data()) != want {
			t.Errorf("item %d: %s\nwant the bytes sent: %s", k, o.raw.Data(), want)
		}
		if m, _ := meta.Accessor(o); m.GetNamespace() != "ns" || m.GetResourceVersion() != o.raw.Meta().ResourceVersion || m.GetUID() == "" {
			t.Errorf("item %d: identity %s/%s uid %s at %s", k, m.GetNamespace(), m.GetName(), m.GetUID(), m.GetResourceVersion())
		}
	}
}

// The raw client's watch delivers each event's object as sent, whether
// written on one line, over several, or in a line longer than its reader's
// buffer; bookmarks with their annotations; errors as Status; and a stream
// cut in the middle of an event ends the watch quietly, as client-go's
// does.
func TestRawWatchDecodesEvents(t *testing.T) {
	big := cmJSON("big", "ubig", "3")
	big = strings.Replace(big, `"n":"1e400"`, `"n":"`+strings.Repeat("x", 200<<10)+`"`, 1)
	pretty := "{\n  \"type\": \"MODIFIED\",\n  \"object\": " + strings.ReplaceAll(cmJSON("b", "ub", "2"), `"data":{`, "\"data\":{\n    ") + "\n}\n"
	w := rawWatchOf(t, event("ADDED", cmJSON("a", "ua", "1"))+"\n  \n"+pretty+event("DELETED", big)+event("BOOKMARK", bookmarkEnd)+
		event("ERROR", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}`)+
		`{"type":"ADDED","object":{"kind":`)
	var got []watch.Event
	for ev := range w.ResultChan() {
		got = append(got, ev)
	}
	if len(got) != 5 {
		t.Fatalf("%d events, want 5: %v", len(got), got)
	}
	for k, want := range []struct {
		typ  watch.EventType
		data string
	}{{watch.Added, cmJSON("a", "ua", "1")}, {watch.Modified, ""}, {watch.Deleted, big}} {
		o, ok := got[k].Object.(*rawObject)
		if got[k].Type != want.typ || !ok || o.raw == nil {
			t.Fatalf("event %d: %s %T, want %s with a raw object", k, got[k].Type, got[k].Object, want.typ)
		}
		if want.data != "" && string(o.raw.Data()) != want.data {
			t.Errorf("event %d: object is not the bytes sent", k)
		}
	}
	if m := got[1].Object.(*rawObject).raw.Meta(); m.Name != "b" || m.ResourceVersion != "2" {
		t.Errorf("pretty-printed event read as %+v", m)
	}
	if got[3].Type != watch.Bookmark || !isInitialEventsEnd(got[3]) {
		t.Errorf("event 3: %s, want the bookmark that ends the initial list", got[3].Type)
	}
	if err := apierrors.FromObject(got[4].Object); got[4].Type != watch.Error || !apierrors.IsResourceExpired(err) {
		t.Errorf("event 4: %s %v, want an error event: Expired", got[4].Type, err)
	}
}

// A watch event that is not JSON ends the watch with an error event, as
// client-go's watch does.
func TestRawWatchRefusesBadEvents(t *testing.T) {
	w := rawWatchOf(t, "{\"type\":\"ADDED\",\"object\":{\"a\":tru}}\n")
	ev := <-w.ResultChan()
	if err := apierrors.FromObject(ev.Object); ev.Type != watch.Error || !strings.Contains(err.Error(), "in literal true") {
		t.Errorf("%s %v; want an error event naming what is wrong", ev.Type, err)
	}
}

// streamingServer streams the list of ConfigMaps of namespace ns as a
// watch. Its first attempt sends a and b, then fails (410, as when the
// position expired); the second sends a and c, then waits for the test to
// see c handed on before it ends the list with a bookmark: the list's
// objects must reach the Handler as they stream in. Later watches send
// nothing.
type streamingServer struct {
	attempts atomic.Int32
	plain    atomic.Int32
	sawC     chan struct{}
}

func (s *streamingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	if q.Get("watch") != "true" {
		s.plain.Add(1)
		fmt.Fprint(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`)
		return
	}
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	if q.Get("sendInitialEvents") != "true" {
		f.Flush()
		<-r.Context().Done()
		return
	}
	switch s.attempts.Add(1) {
	case 1:
		fmt.Fprint(w, event("ADDED", cmJSON("a", "ua", "1"))+event("ADDED", cmJSON("b", "ub", "2"))+
			event("ERROR", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}`))
	default:
		fmt.Fprint(w, event("ADDED", cmJSON("a", "ua", "1"))+event("ADDED", cmJSON("c", "uc", "3")))
		f.Flush()
		select {
		case <-s.sawC:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, event("BOOKMARK", bookmarkEnd))
		f.Flush()
		<-r.Context().Done()
	}
}

type priorLoader map[string]checkpoint.Position

func (l priorLoader) Load(context.Context, string) (checkpoint.Snapshot, error) {
	return checkpoint.Snapshot{Objects: l}, nil
}

// runStreamed runs a source of ConfigMaps in ns against a streamingServer,
// with the checkpoint holding p, until the initial diff is done, and
// returns its deltas.
func runStreamed(t *testing.T, oldObject bool) (*Source, []Delta) {
	t.Helper()
	s := &streamingServer{sawC: make(chan struct{})}
	srv := httptest.NewServer(s)
	defer srv.Close()
	rc, err := NewRESTClient(&rest.Config{Host: srv.URL, WrapTransport: WrapTransport})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []Delta
	var once sync.Once
	src := New(dynamic.New(rc), Options{Resources: []Resource{configmaps}, Namespaces: []string{"ns"}, REST: rc, OldObject: oldObject},
		priorLoader{"ns/p": {UID: "up", ResourceVersion: "1"}},
		HandlerFunc(func(d Delta) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d)
			if d.Name == "c" {
				once.Do(func() { close(s.sawC) })
			}
		}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	select {
	case <-src.Synced():
	case <-ctx.Done():
		t.Error("never synced")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := s.plain.Load(); n != 0 {
		t.Errorf("%d plain lists: the list was not streamed", n)
	}
	mu.Lock()
	defer mu.Unlock()
	return src, got
}

// The initial list, streamed as a watch, reaches the Handler as it
// arrives (the server ends it only once c was handed on). An attempt that
// failed midway and was retried loses and repeats nothing: a, handed on by
// both attempts, once; b, handed on by the first only and missing from the
// list that completed, deleted at the list's resourceVersion; and the
// checkpoint's p, which no list holds, deleted too.
func TestStreamedListIsHandedOnAsItArrives(t *testing.T) {
	for _, tc := range []struct {
		name      string
		oldObject bool
		path      Path
	}{{"raw", false, PathRaw}, {"parsed with OldObject", true, PathParsed}} {
		t.Run(tc.name, func(t *testing.T) {
			src, got := runStreamed(t, tc.oldObject)
			if src.Path() != tc.path {
				t.Errorf("path %s, want %s", src.Path(), tc.path)
			}
			want := []string{
				"added ns/a ua@1 snapshot",
				"added ns/b ub@2 snapshot",
				"added ns/c uc@3 snapshot",
				"deleted ns/b ub@5 snapshot",
				"deleted ns/p up@5 snapshot",
			}
			if s := collected(got).summary(); !slices.Equal(s, want) {
				t.Fatalf("deltas:\n%v\nwant\n%v", s, want)
			}
			for _, d := range got[:3] {
				switch {
				case tc.path == PathRaw && (d.Raw == nil || d.Object != nil):
					t.Errorf("%s: raw %v, object %v; want the raw object only", d.Key(), d.Raw != nil, d.Object != nil)
				case tc.path == PathRaw && string(d.Raw.Data()) != cmJSON(d.Name, string(d.UID), d.ResourceVersion):
					t.Errorf("%s: %s\nwant the bytes sent", d.Key(), d.Raw.Data())
				case tc.path == PathParsed && (d.Raw != nil || d.Object == nil || d.Object.GetName() != d.Name):
					t.Errorf("%s: raw %v, object %v; want the decoded object only", d.Key(), d.Raw != nil, d.Object)
				case tc.path == PathParsed && d.Object.GetManagedFields() != nil:
					t.Errorf("%s: managedFields not dropped", d.Key())
				}
			}
		})
	}
}

func rawCM(t *testing.T, name, uid, rv string) *rawObject {
	t.Helper()
	data := []byte(cmJSON(name, uid, rv))
	m, err := rawobject.Scan(data)
	if err != nil {
		t.Fatal(err)
	}
	return newRawObject(data, m)
}

// Streamed lists leave the reflector only keys (stubs); Replace finds
// from them what a relist lacks, and a relist's unchanged objects produce
// nothing.
func TestRelistDeletesFromStubs(t *testing.T) {
	tr, got := newTestTracker(map[string]checkpoint.Position{"ns/p": {UID: "up", ResourceVersion: "1"}}, false)
	var relists []string
	st := &store{t: tr, ns: "", h: testHealth(tr), relisted: func(_, rv string) { relists = append(relists, rv) }}
	streamList := func(objs ...*rawObject) []any {
		var keys []any
		for _, o := range objs {
			k, err := st.Transformer()(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := k.(cache.ExplicitKey); !ok {
				t.Fatalf("the reflector keeps %T, want a key", k)
			}
			keys = append(keys, k)
		}
		return keys
	}
	if err := st.Replace(streamList(rawCM(t, "a", "ua", "2"), rawCM(t, "b", "ub", "3")), "4"); err != nil {
		t.Fatal(err)
	}
	tr.finishInitialList()
	if err := st.Replace(streamList(rawCM(t, "a", "ua", "2"), rawCM(t, "c", "uc", "5")), "6"); err != nil {
		t.Fatal(err)
	}
	got.expect(t,
		"added ns/a ua@2 snapshot",
		"added ns/b ub@3 snapshot",
		"deleted ns/p up@4 snapshot",
		"added ns/c uc@5 snapshot",
		"deleted ns/b ub@6 snapshot",
	)
	if !slices.Equal(relists, []string{"6"}) {
		t.Errorf("relists %v, want [6]", relists)
	}
	if d := (*got)[4]; d.Object == nil || d.Object.GetUID() != "ub" || d.Object.GetResourceVersion() != "3" {
		t.Errorf("the delete found by the relist does not carry b's last identity: %+v", d.Object)
	}
}

// A relist streamed from one API server fails midway, having handed on b,
// created after the list that then completes: one served by another API
// server, whose cache lags (still not older than the reflector's
// position, which the failed attempt never moved). That list lacks b, but
// is older than b: b is not deleted, and the watch from the list's
// resourceVersion brings its later states, with nothing repeated and
// nothing going back in time.
func TestRelistOlderThanAFailedAttemptDeletesNothingNewer(t *testing.T) {
	tr, got := newTestTracker(nil, false)
	st := &store{t: tr, ns: "", h: testHealth(tr)}
	stream := func(o *rawObject) any {
		k, err := st.Transformer()(o)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if err := st.Replace([]any{stream(rawCM(t, "a", "ua", "2"))}, "4"); err != nil {
		t.Fatal(err)
	}
	tr.finishInitialList()
	// The relist's first attempt, at resourceVersion 7: a, then b; then
	// the connection breaks.
	stream(rawCM(t, "a", "ua", "2"))
	stream(rawCM(t, "b", "ub", "7"))
	// Its retry completes at resourceVersion 6, then the watch from 6.
	if err := st.Replace([]any{stream(rawCM(t, "a", "ua", "2"))}, "6"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{st.Add(rawCM(t, "b", "ub", "7")), st.Update(rawCM(t, "b", "ub", "8"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got.expect(t,
		"added ns/a ua@2 snapshot",
		"added ns/b ub@7 snapshot",
		"updated ns/b ub@8",
	)
}

// The path is decided when the source is made: raw with a REST client,
// parsed without one or with OldObject.
func TestPathIsDecidedAtStart(t *testing.T) {
	rc, err := NewRESTClient(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts Options
		want Path
	}{
		{Options{REST: rc}, PathRaw},
		{Options{REST: rc, KeepManagedFields: true}, PathRaw},
		{Options{REST: rc, OldObject: true}, PathParsed},
		{Options{}, PathParsed},
	} {
		if got := New(nil, tc.opts, nil, HandlerFunc(func(Delta) {}), slog.New(slog.DiscardHandler)).Path(); got != tc.want {
			t.Errorf("REST %v, OldObject %v: path %s, want %s", tc.opts.REST != nil, tc.opts.OldObject, got, tc.want)
		}
	}
}

// A list the API server refuses fails with the API server's Status, as
// the dynamic client's does: the reflector and the health checks tell a
// Forbidden or an Expired list by it.
func TestRawListErrorsAreTheAPIServersStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("resourceVersion") == "1" {
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}`)
			return
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"x\" cannot list resource \"configmaps\"","reason":"Forbidden","code":403}`)
	}))
	defer srv.Close()
	_, c := rawClientFor(t, srv)
	if _, err := c.List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot list") {
		t.Errorf("list: %v; want the API server's Forbidden", err)
	}
	if _, err := c.List(t.Context(), metav1.ListOptions{ResourceVersion: "1"}); !apierrors.IsResourceExpired(err) {
		t.Errorf("list: %v; want the API server's Expired", err)
	}
}

// TestWatchLineLongerThanTheBufferIsKeptAtItsSize: a line gathered from
// several reads is held in a buffer of about its size, not with the
// slack of its growth, since the event's object keeps it while in flight.
func TestWatchLineLongerThanTheBufferIsKeptAtItsSize(t *testing.T) {
	for _, n := range []int{watchBufferSize + 1<<10, 2*watchBufferSize + 1<<10, 200 << 10} {
		line := strings.Repeat("x", n) + "\n"
		d := newEventDecoder(io.NopCloser(strings.NewReader(line)))
		frame, err := d.line(nil)
		if err != nil || string(frame) != line {
			t.Fatalf("line of %d bytes: %d bytes, %v", n, len(frame), err)
		}
		// The allocator rounds a large buffer up to whole 8 KiB pages.
		if slack := cap(frame) - len(frame); slack > max(len(frame)/8, 8<<10) {
			t.Errorf("line of %d bytes kept in a buffer of %d", len(frame), cap(frame))
		}
	}
}
