package cache

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// Run fills s from lw with a client-go Reflector until ctx ends: a list,
// then a watch from its position, resumed from the latest position when it
// ends, and a new list when the bus no longer holds it. It returns
// ctx.Err().
func Run(ctx context.Context, name string, lw cache.ListerWatcher, s *Store) error {
	r := cache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, s, cache.ReflectorOptions{Name: name})
	r.RunWithContext(ctx)
	return ctx.Err()
}
