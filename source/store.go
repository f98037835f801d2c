package source

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// store is what a reflector fills: client-go's Reflector lists and watches,
// and calls the store with each complete list and each watch event. This
// one keeps no objects. It passes everything to its resource's tracker,
// which remembers only each object's uid and resourceVersion, so that the
// memory the source holds does not grow with the size of the objects it
// watches.
type store struct {
	t  *tracker
	ns string
	// transform is applied to every object before it is handed on.
	transform cache.TransformFunc
	// relisted is told of every list after the first.
	relisted func(ns, rv string)
}

var _ cache.TransformingStore = (*store)(nil)

func (s *store) object(obj any) (*unstructured.Unstructured, bool) {
	if s.transform != nil {
		var err error
		if obj, err = s.transform(obj); err != nil {
			s.t.log.Error("ignoring object the transform failed on", "resource", s.t.res.Name(), "err", err)
			return nil, false
		}
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		s.t.log.Error("ignoring object of unexpected type", "resource", s.t.res.Name(), "type", typeName(obj))
	}
	return u, ok
}

// Add takes a watch's ADDED event.
func (s *store) Add(obj any) error {
	if u, ok := s.object(obj); ok {
		s.t.add(u)
	}
	return nil
}

// Update takes a watch's MODIFIED event.
func (s *store) Update(obj any) error {
	if u, ok := s.object(obj); ok {
		s.t.update(u)
	}
	return nil
}

// Delete takes a watch's DELETED event.
func (s *store) Delete(obj any) error {
	if u, ok := s.object(obj); ok {
		s.t.remove(u)
	}
	return nil
}

// Replace takes a complete list at resourceVersion rv.
func (s *store) Replace(items []any, rv string) error {
	for i := range items {
		if u, ok := s.object(items[i]); ok {
			items[i] = u
		}
	}
	if s.t.replace(s.ns, items, rv) && s.relisted != nil {
		s.relisted(s.ns, rv)
	}
	return nil
}

// Resync does nothing: the source's reflectors never resync.
func (s *store) Resync() error { return nil }

// Transformer lets the reflector apply the transform to the objects it
// gathers while streaming a list, before Replace.
func (s *store) Transformer() cache.TransformFunc { return s.transform }
