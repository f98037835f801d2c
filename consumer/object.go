package consumer

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// AnnotationResourceVersion holds, on every object a ListerWatcher hands
// out, the API server's resourceVersion of that state. The object's own
// metadata.resourceVersion is a bus position instead.
const AnnotationResourceVersion = "kubebus.io/resource-version"

// AnnotationFinalStateUnknown is "true" on a deleted object whose last
// state the ListerWatcher does not have: it carries only the object's
// identity. See the package doc for when that happens.
const AnnotationFinalStateUnknown = "kubebus.io/final-state-unknown"

// decodeObject reads the object of an event's data, {"object": {...}}. It
// returns the object and its JSON as the event holds it.
func decodeObject(data []byte) (*unstructured.Unstructured, json.RawMessage, error) {
	var d struct {
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	if len(d.Object) == 0 || string(d.Object) == "null" {
		return nil, nil, errors.New("data holds no object")
	}
	u, err := parseObject(d.Object)
	if err != nil {
		return nil, nil, err
	}
	return u, d.Object, nil
}

// parseObject decodes one object's JSON. Numbers become int64 or float64,
// as unstructured objects need.
func parseObject(raw []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("data.object: %w", err)
	}
	if m == nil {
		return nil, errors.New("data.object is not an object")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// stamp makes u, an object as the API server served it, one the informer
// can hold: its resourceVersion becomes the bus position pos, and the API
// server's resourceVersion moves to AnnotationResourceVersion.
func stamp(u *unstructured.Unstructured, pos string) {
	a := u.GetAnnotations()
	if a == nil {
		a = make(map[string]string, 1)
	}
	a[AnnotationResourceVersion] = u.GetResourceVersion()
	u.SetAnnotations(a)
	u.SetResourceVersion(pos)
}

// typeMeta is the apiVersion and kind of the resource's objects, learnt
// from its events; empty until one arrives.
type typeMeta struct{ apiVersion, kind string }

// stub is an identity-only object for a deleted object whose last state
// is unknown.
func stub(tm typeMeta, key string, e entry, pos string) *unstructured.Unstructured {
	ns, name := splitKey(key)
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if tm.kind != "" {
		u.SetAPIVersion(tm.apiVersion)
		u.SetKind(tm.kind)
	}
	u.SetNamespace(ns)
	u.SetName(name)
	if s := e.uid.String(); s != "" {
		u.SetUID(types.UID(s))
	}
	u.SetAnnotations(map[string]string{
		AnnotationResourceVersion:   e.rv.String(),
		AnnotationFinalStateUnknown: "true",
	})
	u.SetResourceVersion(pos)
	return u
}

// bookmark is the object of a Bookmark event at pos.
func bookmark(tm typeMeta, pos string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if tm.kind != "" {
		u.SetAPIVersion(tm.apiVersion)
		u.SetKind(tm.kind)
	}
	u.SetResourceVersion(pos)
	return u
}

// splitKey undoes objectKey.
func splitKey(key string) (namespace, name string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
