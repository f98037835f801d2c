package source

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

var defaultExclusions = []string{"events", "events.events.k8s.io", "leases.coordination.k8s.io"}

func TestNewSelectionRefusesBadEntries(t *testing.T) {
	for _, tc := range []struct {
		name                string
		resources, excludes []string
		// bad are the entries refused, "r:" for resources, "x:" for
		// exclusions.
		bad []string
	}{
		{"names and patterns", []string{"configmaps", "*", "*.example.com", "*.apps", "deploy"}, defaultExclusions, nil},
		{"no resources", nil, nil, []string{"r:"}},
		{"star inside a name", []string{"*foo"}, nil, []string{"r:*foo"}},
		{"star at the end", []string{"apps.*"}, nil, []string{"r:apps.*"}},
		{"empty group", []string{"*."}, nil, []string{"r:*."}},
		{"two stars", []string{"*.*"}, nil, []string{"r:*.*"}},
		{"bad group", []string{"*.Example_com"}, nil, []string{"r:*.Example_com"}},
		{"empty entry", []string{"configmaps", ""}, nil, []string{"r:"}},
		{"exclude everything", []string{"*"}, []string{"*"}, []string{"x:*"}},
		{"exclusion not a name", []string{"*"}, []string{"Events", "leases/x"}, []string{"x:Events", "x:leases/x"}},
		{"exclusion pattern", []string{"*"}, []string{"*.k8s.io", "apps.*"}, []string{"x:apps.*"}},
		{"none alone", []string{"*"}, []string{"none"}, nil},
		{"none with others", []string{"*"}, []string{"none", "events"}, []string{"x:none"}},
		{"every fault at once", []string{"*x", "ok"}, []string{"*", "a.*"}, []string{"r:*x", "x:*", "x:a.*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSelection(tc.resources, tc.excludes)
			var got []string
			for _, e := range unjoinErrs(err) {
				var se *SelectionError
				if !errors.As(e, &se) {
					t.Fatalf("error %v is not a *SelectionError", e)
				}
				if se.Exclusion {
					got = append(got, "x:"+se.Entry)
				} else {
					got = append(got, "r:"+se.Entry)
				}
				if se.Reason == "" {
					t.Errorf("%q refused for no reason", se.Entry)
				}
			}
			if !slices.Equal(got, tc.bad) {
				t.Errorf("refused %q, want %q (error: %v)", got, tc.bad, err)
			}
		})
	}
}

func unjoinErrs(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// served is what the fake discovery serves. The first version of a group
// is its preferred one.
func served() *fake.FakeDiscovery {
	lw := []string{"get", "list", "watch", "create", "delete"}
	return &fake.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: lw, ShortNames: []string{"cm"}},
			{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: lw},
			{Name: "events", Kind: "Event", Namespaced: true, Verbs: lw},
			{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: lw},
			{Name: "pods/log", Kind: "Pod", Namespaced: true, Verbs: []string{"get"}},
			{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "patch"}},
			{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
			{Name: "namespaces", Kind: "Namespace", Verbs: lw},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: lw},
		}},
		{GroupVersion: "apps/v1beta1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: lw},
			{Name: "oldthings", Kind: "OldThing", Namespaced: true, Verbs: lw},
		}},
		{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "events", Kind: "Event", Namespaced: true, Verbs: lw},
		}},
		{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "leases", Kind: "Lease", Namespaced: true, Verbs: lw},
		}},
		{GroupVersion: "authorization.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview", Verbs: []string{"create"}},
		}},
		{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
			{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: lw},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: lw},
		}},
		{GroupVersion: "stable.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "gizmos", Kind: "Gizmo", Verbs: lw},
		}},
		{GroupVersion: "notexample.com/v1", APIResources: []metav1.APIResource{
			{Name: "doodads", Kind: "Doodad", Verbs: lw},
		}},
	}}}
}

func TestSetSelects(t *testing.T) {
	for _, tc := range []struct {
		name                string
		resources, excludes []string
		// want are the resources selected, as resource.version.group.
		want []string
	}{
		{"names only", []string{"cm", "deployments.apps"}, defaultExclusions,
			[]string{"configmaps.v1", "deployments.v1.apps"}},
		{"everything: preferred versions, no secrets, exclusions, nor what cannot be listed and watched", []string{"*"}, defaultExclusions,
			[]string{"configmaps.v1", "namespaces.v1", "pods.v1", "deployments.v1.apps", "oldthings.v1beta1.apps", "widgets.v2.example.com",
				"doodads.v1.notexample.com", "gizmos.v1.stable.example.com"}},
		{"secrets when named", []string{"*", "secrets"}, defaultExclusions,
			[]string{"configmaps.v1", "namespaces.v1", "pods.v1", "secrets.v1", "deployments.v1.apps", "oldthings.v1beta1.apps",
				"widgets.v2.example.com", "doodads.v1.notexample.com", "gizmos.v1.stable.example.com"}},
		{"a name wins over its exclusion", []string{"*.k8s.io", "events"}, defaultExclusions,
			[]string{"events.v1"}},
		{"a group and its subgroups, not a group that merely ends the same", []string{"*.example.com"}, defaultExclusions,
			[]string{"widgets.v2.example.com", "gizmos.v1.stable.example.com"}},
		{"one group", []string{"*.apps"}, nil, []string{"deployments.v1.apps", "oldthings.v1beta1.apps"}},
		{"nothing excluded", []string{"*.k8s.io"}, nil, []string{"leases.v1.coordination.k8s.io", "events.v1.events.k8s.io"}},
		{"excluded by group, by name, by versioned name", []string{"*"}, []string{"*.example.com", "pods", "oldthings.v1beta1.apps", "namespaces.v1"},
			[]string{"configmaps.v1", "events.v1", "deployments.v1.apps", "leases.v1.coordination.k8s.io", "events.v1.events.k8s.io",
				"doodads.v1.notexample.com"}},
		{"a name and a pattern of the same resource: once", []string{"deployments.v1beta1.apps", "*.apps"}, nil,
			[]string{"deployments.v1beta1.apps", "oldthings.v1beta1.apps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := NewSelection(tc.resources, tc.excludes)
			if err != nil {
				t.Fatal(err)
			}
			set := NewSet(nil, served(), SetOptions{Selection: sel}, nil, nil, slog.New(slog.DiscardHandler))
			if err := set.Select(t.Context()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range set.Resources() {
				name := r.Resource + "." + r.Version
				if r.Group != "" {
					name += "." + r.Group
				}
				got = append(got, name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("selected\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestSetSelectFailsOnUnknownNames(t *testing.T) {
	sel, err := NewSelection([]string{"*", "nosuchthings", "cm", "nor.these"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet(nil, served(), SetOptions{Selection: sel}, nil, nil, slog.New(slog.DiscardHandler))
	err = set.Select(t.Context())
	if !errors.Is(err, ErrUnknownResource) || !strings.Contains(err.Error(), "nosuchthings") || !strings.Contains(err.Error(), "nor.these") {
		t.Errorf("Select: %v; want ErrUnknownResource naming nosuchthings and nor.these", err)
	}
}

// A resource a pattern selects that cannot be listed and watched is
// logged once, however often the selection is made.
func TestSelectorLogsUnwatchableOnce(t *testing.T) {
	sel, err := NewSelection([]string{"*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := newSelector(sel, served(), slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		if _, err := s.patterned(); err != nil {
			t.Fatal(err)
		}
	}
	for _, res := range []string{"bindings", "selfsubjectaccessreviews.authorization.k8s.io"} {
		if n := strings.Count(logs.String(), "resource="+res+" "); n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", res, n, logs.String())
		}
	}
	if strings.Contains(logs.String(), "pods/") {
		t.Errorf("a subresource was logged; they are skipped silently:\n%s", logs.String())
	}
}

// An exclusion that matches no resource served is reported, as given.
func TestSetReportsUnmatchedExclusions(t *testing.T) {
	sel, err := NewSelection([]string{"*"}, []string{"events", "leases.coordination.k8s.io", "lease.coordination.k8s.io",
		"*.example.com", "*.nosuch.io", "widgets.v1.example.com", "widgets.v9.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet(nil, served(), SetOptions{Selection: sel}, nil, nil, slog.New(slog.DiscardHandler))
	if err := set.Select(t.Context()); err != nil {
		t.Fatal(err)
	}
	// widgets.v1.example.com is served, but not preferred: no pattern
	// would select it, so excluding it excludes nothing.
	want := []string{"*.nosuch.io", "lease.coordination.k8s.io", "widgets.v1.example.com", "widgets.v9.example.com"}
	if got := set.UnmatchedExclusions(); !slices.Equal(got, want) {
		t.Errorf("unmatched %q; want %q", got, want)
	}
}
