package source

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// store is what a reflector fills: client-go's Reflector lists and watches,
// and calls the store with each complete list and each watch event. This
// one keeps no objects. It passes everything to its resource's tracker,
// which remembers only each object's uid and resourceVersion, so that the
// memory the source holds does not grow with the size of the objects it
// watches.
//
// A list streamed as a watch (sendInitialEvents) is not gathered whole:
// the reflector runs every object of it through the store's Transformer
// as it arrives, which hands the object on at once and gives the
// reflector back only its key (a cache.ExplicitKey) to keep until the list
// ends; Replace then gets the keys, from which it finds the objects the
// list lacks. The initial list's objects thus reach the Handler as they
// stream in, and are not all held at once. A plain list (when the API
// server refuses to stream one) is gathered whole by the reflector, as
// client-go does, and handed on by Replace. (client-go's watch-list
// consistency check, a test aid enabled by KUBE_WATCHLIST_INCONSISTENCY_DETECTOR,
// would find keys where it expects objects; it is off unless set.)
type store struct {
	t  *tracker
	ns string
	// h is the reflector's health, told of every call the reflector makes
	// into the store: see busy.
	h *health
	// transform is applied to every object before it is handed on.
	transform cache.TransformFunc
	// relisted is told of every list after the first.
	relisted func(ns, rv string)
}

var _ cache.TransformingStore = (*store)(nil)

// object is what the tracker takes of obj, transformed. An object the
// transform fails on is handed on as it came, so that no change is lost;
// anything but an object is dropped.
func (s *store) object(obj any) (object, bool) {
	if s.transform != nil {
		if out, err := s.transform(obj); err != nil {
			s.t.log.Error("handing on an object untransformed: the transform failed", "resource", s.t.res.Name(), "err", err)
		} else {
			obj = out
		}
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return parsedObject(o), true
	case *rawObject:
		if o.raw != nil {
			return o.object(), true
		}
	}
	s.t.log.Error("ignoring object of unexpected type", "resource", s.t.res.Name(), "type", typeName(obj))
	return object{}, false
}

// busy tells the reflector's health that a call into the store began,
// and returns what tells it the call ended. The reflector reads nothing
// while a call goes on, which may be long when the Handler holds the
// source (see Handler): that is not the API server's silence.
func (s *store) busy() (done func()) {
	s.h.holding(true, time.Now())
	return func() { s.h.holding(false, time.Now()) }
}

// Add takes a watch's ADDED event.
func (s *store) Add(obj any) error {
	defer s.busy()()
	if o, ok := s.object(obj); ok {
		s.t.addObject(o)
	}
	return nil
}

// Update takes a watch's MODIFIED event.
func (s *store) Update(obj any) error {
	defer s.busy()()
	if o, ok := s.object(obj); ok {
		s.t.updateObject(o)
	}
	return nil
}

// Delete takes a watch's DELETED event.
func (s *store) Delete(obj any) error {
	defer s.busy()()
	if o, ok := s.object(obj); ok {
		s.t.removeObject(o)
	}
	return nil
}

// Replace takes a complete list at resourceVersion rv: the keys of the
// objects streamed through the Transformer, already handed on, or whole
// objects, handed on now.
func (s *store) Replace(items []any, rv string) error {
	defer s.busy()()
	listed := make(map[string]bool, len(items))
	for _, it := range items {
		if k, ok := it.(cache.ExplicitKey); ok {
			listed[string(k)] = true
			continue
		}
		if o, ok := s.object(it); ok {
			s.t.listItem(o)
			listed[o.key()] = true
		}
	}
	if s.t.endList(s.ns, listed, rv) && s.relisted != nil {
		s.relisted(s.ns, rv)
	}
	return nil
}

// Resync does nothing: the source's reflectors never resync.
func (s *store) Resync() error { return nil }

// Transformer is what the reflector runs each object of a list streamed
// as a watch through, as it arrives: see streamed.
func (s *store) Transformer() cache.TransformFunc { return s.streamed }

// streamed hands on an object of a list being streamed, and returns its
// key, all the reflector keeps of it until the list ends and it calls
// Replace. It never fails: the reflector would drop the object from the
// list, and Replace would take it for deleted. (An object of a list
// retried after failing midway is handed on again, and produces nothing
// unless it changed.) What is not an object is returned as it came, and
// dropped by Replace.
func (s *store) streamed(obj any) (any, error) {
	defer s.busy()()
	o, ok := s.object(obj)
	if !ok {
		return obj, nil
	}
	s.t.listItem(o)
	return cache.ExplicitKey(o.key()), nil
}
