package source

import (
	"context"
	"log/slog"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// listWatch lists and watches with the configured selectors, streams the
// initial list where the API server offers it, and reports the calls that
// fail, except a streamed list the API server refuses: the reflector then
// lists instead.
func TestListWatchOnAPIServer(t *testing.T) {
	c := sharedCluster(t)
	for _, path := range []Path{PathRaw, PathParsed} {
		t.Run(string(path), func(t *testing.T) {
			ns := c.namespace(t)
			keep := map[string]string{"app": "bridge"}
			c.configMap(t, ns, "kept", keep)
			c.configMap(t, ns, "left-out", nil)
			obs := &watchErrorCount{}
			opts := Options{Resources: []Resource{configmaps}, Namespaces: []string{ns}, LabelSelector: "app=bridge", Observer: obs}
			src := sourceOn(t, c.rc, path, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
			lw := src.listWatch(configmaps, ns).(cache.ListerWatcherWithContext)
			if watchlist.DoesClientNotSupportWatchListSemantics(lw) {
				t.Error("the ListerWatcher says it cannot stream lists; the reflector would never use them")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if got := names(t, list); len(got) != 1 || got[0] != "kept" {
				t.Errorf("list holds %v, want [kept]", got)
			}

			w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: listRV(list), AllowWatchBookmarks: true})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer w.Stop()
			c.configMap(t, ns, "left-out-2", nil)
			c.configMap(t, ns, "kept-2", keep)
			// left-out-2 was made first: the watch would deliver it before
			// kept-2, were the selector not applied.
			for got := ""; got != "kept-2"; {
				select {
				case e, ok := <-w.ResultChan():
					if !ok {
						t.Fatal("watch ended before it delivered kept-2")
					}
					if e.Type == watch.Bookmark {
						continue
					}
					if got = names(t, e.Object)[0]; got != "kept-2" {
						t.Errorf("watch delivered %s %s, want only kept-2", e.Type, got)
					}
				case <-ctx.Done():
					t.Fatal("watch delivered no kept-2 within 30s")
				}
			}
			if n := obs.n.Load(); n != 0 {
				t.Errorf("%d calls reported failed, want none", n)
			}

			// A streamed list the API server refuses is no failure. (This
			// one is refused for lacking resourceVersionMatch.)
			on := true
			refused := metav1.ListOptions{SendInitialEvents: &on, AllowWatchBookmarks: true}
			if w, err := lw.WatchWithContext(ctx, refused); err == nil {
				w.Stop()
				t.Fatal("streamed list without resourceVersionMatch accepted, want it refused")
			} else if !watchListRefused(refused, err) {
				t.Errorf("watchListRefused(%v) is false, want true", err)
			}
			if n := obs.n.Load(); n != 0 {
				t.Errorf("%d calls reported failed after a refused streamed list, want none", n)
			}

			// A user who may do nothing: the list and the watch both fail,
			// and are reported.
			denied := sourceOn(t, c.as(t, "nobody-"+string(path), ns), path, opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
			dlw := denied.listWatch(configmaps, ns).(cache.ListerWatcherWithContext)
			if _, err := dlw.ListWithContext(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("list without permission: %v, want forbidden", err)
			}
			if _, err := dlw.WatchWithContext(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("watch without permission: %v, want forbidden", err)
			}
			if n := obs.n.Load(); n != 2 {
				t.Errorf("%d calls reported failed, want the list and the watch", n)
			}
		})
	}
}

// names is the names of the objects in obj, a list or one object.
func names(t *testing.T, obj runtime.Object) []string {
	t.Helper()
	if !meta.IsListType(obj) {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		return []string{m.GetName()}
	}
	var out []string
	if err := meta.EachListItem(obj, func(item runtime.Object) error {
		m, err := meta.Accessor(item)
		if err != nil {
			return err
		}
		out = append(out, m.GetName())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
