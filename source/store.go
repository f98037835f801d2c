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

// object is obj transformed. An object the transform fails on is handed on
// as it came, so that no change is lost; anything but an object is dropped.
func (s *store) object(obj any) (*unstructured.Unstructured, bool) {
	if s.transform != nil {
		if out, err := s.transform(obj); err != nil {
			s.t.log.Error("handing on an object untransformed: the transform failed", "resource", s.t.res.Name(), "err", err)
		} else {
			obj = out
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
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if u, ok := s.object(it); ok {
			objs = append(objs, u)
		}
	}
	if s.t.replace(s.ns, objs, rv) && s.relisted != nil {
		s.relisted(s.ns, rv)
	}
	return nil
}

// Resync does nothing: the source's reflectors never resync.
func (s *store) Resync() error { return nil }

// Transformer lets the reflector apply the transform to the objects it
// gathers while streaming a list, before Replace.
func (s *store) Transformer() cache.TransformFunc { return s.transform }
