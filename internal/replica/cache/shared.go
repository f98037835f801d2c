package cache

import (
	"bytes"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MaxEncodings bounds the encodings a Shared keeps. An encoding is keyed
// by its encoder's identifier, which the API server's watch handler
// derives from the media type, the Table options and the event's type: a
// handful in practice (JSON per event type; Table with and without
// headers). An encoder past the bound encodes the object itself, as if
// nothing were shared.
const MaxEncodings = 8

// Shared is one state of an object as a Store hands it to its watchers:
// a runtime.CacheableObject that keeps each encoding of it, so that an
// encoder (the API server's watch handler, a serializer, a versioning
// codec) encodes it once and every watcher that encodes it alike writes
// the same bytes.
//
// The object is shared: neither Shared nor its readers change it. An
// encoder is handed a copy of it (runtime.CacheableObject's contract), so
// that one that sets something on the object it encodes (its kind, for a
// conversion) changes nothing another reads.
//
// A Shared's encodings live as long as the Shared: see the package's
// Memory section. All methods may be called concurrently.
type Shared struct {
	obj *unstructured.Unstructured

	mu        sync.RWMutex
	encodings []*encoding // at most MaxEncodings
}

// encoding is one encoding of a Shared, made once.
type encoding struct {
	id   runtime.Identifier
	once sync.Once
	raw  []byte
	err  error
}

var _ runtime.CacheableObject = (*Shared)(nil)

// NewShared shares u, which nobody may change from now on.
func NewShared(u *unstructured.Unstructured) *Shared { return &Shared{obj: u} }

// Object is the shared object; the caller must not change it.
func (s *Shared) Object() *unstructured.Unstructured { return s.obj }

// CacheEncode writes the encoding of the object by the encoder id,
// encoding it with encode, which must be the same for every call with id,
// the first time only. An encoding that failed fails alike for every
// caller.
func (s *Shared) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	e := s.encoding(id)
	if e == nil {
		return encode(s.obj.DeepCopy(), w)
	}
	e.once.Do(func() {
		b := buffers.Get().(*bytes.Buffer)
		defer buffers.Put(b)
		b.Reset()
		if e.err = encode(s.obj.DeepCopy(), b); e.err == nil {
			e.raw = bytes.Clone(b.Bytes())
		}
	})
	if e.err != nil {
		return e.err
	}
	if sp, ok := w.(runtime.Splice); ok {
		sp.Splice(e.raw)
		return nil
	}
	_, err := w.Write(e.raw)
	return err
}

// buffers are where encodings are made: an encoding keeps a copy of its
// exact size, and the buffer, grown to the size of the objects encoded,
// serves the next.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encoding returns the encoding of id, added when new; nil once
// MaxEncodings are kept.
func (s *Shared) encoding(id runtime.Identifier) *encoding {
	s.mu.RLock()
	for _, e := range s.encodings {
		if e.id == id {
			s.mu.RUnlock()
			return e
		}
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.encodings {
		if e.id == id {
			return e
		}
	}
	if len(s.encodings) == MaxEncodings {
		return nil
	}
	e := &encoding{id: id}
	s.encodings = append(s.encodings, e)
	return e
}

// GetObject returns a copy of the object, the caller's to change
// (runtime.CacheableObject).
func (s *Shared) GetObject() runtime.Object { return s.obj.DeepCopy() }

// GetObjectKind is the object's kind. Setting it would change the shared
// object: it sets that of a copy, which nobody reads.
func (s *Shared) GetObjectKind() schema.ObjectKind { return readOnlyKind{s.obj.GroupVersionKind()} }

// DeepCopyObject returns a new Shared of a copy of the object, with no
// encoding.
func (s *Shared) DeepCopyObject() runtime.Object { return NewShared(s.obj.DeepCopy()) }

// readOnlyKind is a kind whose setter changes nothing shared.
type readOnlyKind struct{ gvk schema.GroupVersionKind }

func (k readOnlyKind) GroupVersionKind() schema.GroupVersionKind { return k.gvk }

func (k readOnlyKind) SetGroupVersionKind(schema.GroupVersionKind) {}
