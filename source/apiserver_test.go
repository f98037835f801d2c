package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/kubebus/bridge/test/controlplane"
)

// cluster is the shared control plane, as its admin sees it.
type cluster struct {
	rc *rest.Config // wrapped with WrapTransport
	kc kubernetes.Interface
}

func sharedCluster(t *testing.T) cluster {
	t.Helper()
	rc := controlplane.Shared(t).RESTConfig()
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	rc.WrapTransport = WrapTransport
	return cluster{rc: rc, kc: kc}
}

// namespace makes a namespace for t.
func (c cluster) namespace(t *testing.T) string {
	t.Helper()
	ns, err := c.kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "source-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// as is the configuration of user, who may do verbs on configmaps in ns.
func (c cluster) as(t *testing.T, user, ns string, verbs ...string) *rest.Config {
	t.Helper()
	if len(verbs) > 0 {
		rbac := c.kc.RbacV1()
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}}}
		if _, err := rbac.Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		if _, err := rbac.RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rc := rest.CopyConfig(c.rc)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	return rc
}

// configMap makes a ConfigMap in ns with labels.
func (c cluster) configMap(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.kc.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sourceOn is a Source of opts on path, with the client of rc.
func sourceOn(t *testing.T, rc *rest.Config, path Path, opts Options, log *slog.Logger) *Source {
	t.Helper()
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if path == PathRaw {
		if opts.REST, err = NewRESTClient(rc); err != nil {
			t.Fatal(err)
		}
	}
	return New(client, opts, emptyLoader{}, HandlerFunc(func(Delta) {}), log)
}

// Check fails a start that could not work, naming the resource and the
// namespace at fault, on both paths: a transport not wrapped, a selector
// the API server refuses, a permission missing in one namespace, list
// without watch, a resource not served.
func TestCheckOnAPIServer(t *testing.T) {
	c := sharedCluster(t)
	a, b := c.namespace(t), c.namespace(t)
	unwrapped := rest.CopyConfig(c.rc)
	unwrapped.WrapTransport = nil
	widgets := Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}

	tests := []struct {
		name      string
		rc        *rest.Config
		opts      Options
		check     func(error) bool // nil: Check must succeed
		wantNames []string         // in the error
		notNames  []string         // not in the error
	}{
		{name: "every namespace may be listed and watched", rc: c.rc,
			opts: Options{Resources: []Resource{configmaps}, Namespaces: []string{a, b}}},
		{name: "every namespace, with a selector", rc: c.rc,
			opts: Options{Resources: []Resource{configmaps}, LabelSelector: "app=bridge", FieldSelector: "metadata.name!=x"}},
		{name: "transport not wrapped", rc: unwrapped,
			opts:  Options{Resources: []Resource{configmaps}, Namespaces: []string{a}},
			check: func(err error) bool { return errors.Is(err, errNotWrapped) }},
		{name: "field selector refused", rc: c.rc,
			opts:      Options{Resources: []Resource{configmaps}, Namespaces: []string{a}, FieldSelector: "spec.nope=x"},
			check:     func(err error) bool { return errors.Is(err, ErrBadSelector) },
			wantNames: []string{"configmaps", `"spec.nope=x"`}},
		{name: "label selector refused", rc: c.rc,
			opts:  Options{Resources: []Resource{configmaps}, Namespaces: []string{a}, LabelSelector: "app in (x"},
			check: func(err error) bool { return errors.Is(err, ErrBadSelector) }},
		{name: "no permission in one namespace", rc: c.as(t, "reader", a, "list", "watch"),
			opts:      Options{Resources: []Resource{configmaps}, Namespaces: []string{a, b}},
			check:     apierrors.IsForbidden,
			wantNames: []string{"list configmaps in namespace " + b}, notNames: []string{"namespace " + a}},
		{name: "list but not watch", rc: c.as(t, "lister", a, "list"),
			opts:      Options{Resources: []Resource{configmaps}, Namespaces: []string{a}},
			check:     func(err error) bool { return errors.Is(err, ErrWatchForbidden) },
			wantNames: []string{"watch configmaps in namespace " + a}},
		{name: "resource not served", rc: c.rc,
			opts:      Options{Resources: []Resource{configmaps, widgets}, Namespaces: []string{a}},
			check:     apierrors.IsNotFound,
			wantNames: []string{"list widgets.example.com in namespace " + a}, notNames: []string{"list configmaps"}},
	}
	for _, path := range []Path{PathRaw, PathParsed} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", path, tt.name), func(t *testing.T) {
				src := sourceOn(t, tt.rc, path, tt.opts, slog.New(slog.NewTextHandler(t.Output(), nil)))
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				err := src.Check(ctx)
				switch {
				case tt.check == nil && err != nil:
					t.Fatalf("Check: %v", err)
				case tt.check == nil:
					return
				case err == nil || !tt.check(err):
					t.Fatalf("Check: %v, want the failure of %q", err, tt.name)
				}
				for _, s := range tt.wantNames {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("Check: %v; want it to say %q", err, s)
					}
				}
				for _, s := range tt.notNames {
					if strings.Contains(err.Error(), s) {
						t.Errorf("Check: %v; want no %q", err, s)
					}
				}
			})
		}
	}
}

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
