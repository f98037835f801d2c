package source

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

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
			t.Run(string(path)+"/"+tt.name, func(t *testing.T) {
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
