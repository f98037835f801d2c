package source

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// ErrUnknownResource is wrapped by Resolve's error when a name matches no
// resource the API server serves.
var ErrUnknownResource = errors.New("unknown resource")

// Resolve turns resource names, written the way kubectl takes them
// ("configmaps", "cm", "deployments.apps", "deployments.v1.apps",
// "widgets.v1alpha1.example.com"), into resources, using the API server's
// discovery information. Names that resolve to the same resource are
// returned once. Every name that does not resolve is reported, joined in
// one error.
func Resolve(dc discovery.DiscoveryInterface, names []string) ([]Resource, error) {
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(
		restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, func(string) {})

	var (
		out  []Resource
		errs []error
		seen = map[schema.GroupVersionResource]bool{}
	)
	for _, name := range names {
		r, err := resolveOne(mapper, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[r.GroupVersionResource] {
			seen[r.GroupVersionResource] = true
			out = append(out, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func resolveOne(mapper meta.RESTMapper, name string) (Resource, error) {
	unknown := func(err error) error {
		if meta.IsNoMatchError(err) || meta.IsAmbiguousError(err) {
			return fmt.Errorf("source: resource %q: %w: %v", name, ErrUnknownResource, err)
		}
		return fmt.Errorf("source: resolve resource %q: %w", name, err)
	}
	if name == "" || strings.ContainsAny(name, "/ ") {
		return Resource{}, fmt.Errorf("source: resource %q: %w: not a resource name", name, ErrUnknownResource)
	}

	// "a.b.c" may be resource.version.group or resource.group (a group
	// with dots): kubectl tries the first reading, then the second.
	var gvr schema.GroupVersionResource
	full, partial := schema.ParseResourceArg(strings.ToLower(name))
	resolved := false
	if full != nil {
		if r, err := mapper.ResourceFor(*full); err == nil {
			gvr, resolved = r, true
		}
	}
	if !resolved {
		r, err := mapper.ResourceFor(partial.WithVersion(""))
		if err != nil {
			return Resource{}, unknown(err)
		}
		gvr = r
	}

	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return Resource{}, unknown(err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Resource{}, unknown(err)
	}
	return Resource{
		GroupVersionResource: mapping.Resource,
		Kind:                 mapping.GroupVersionKind.Kind,
		Namespaced:           mapping.Scope.Name() == meta.RESTScopeNameNamespace,
	}, nil
}
