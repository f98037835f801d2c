// Package rawaccess gives the bridge's own packages what a
// source.RawObject keeps to itself: the scan of its JSON (rawobject.Meta),
// which says where metadata.managedFields lies and what the event encoder
// may copy as it is, and the making of a RawObject from a scan already
// made (a projection's). Package source is public, and its exported API
// names no internal type, so that a View can be written outside this
// module; the scan therefore sits in unexported fields, and this package
// is the door the encoder (internal/event) and the view (internal/view)
// reach it through, without scanning the bytes again.
//
// Package source sets both functions when it is initialised. Every
// program that holds a source.RawObject has imported source, so they are
// set wherever they can be called.
package rawaccess

import "github.com/kubebus/bridge/internal/rawobject"

var (
	// Meta returns the scan of raw, a *source.RawObject: read it, never
	// modify it.
	Meta func(raw any) *rawobject.Meta
	// New returns a *source.RawObject of data and m, which must be what
	// rawobject.Scan, or rawobject.Meta.Project, made of data.
	New func(data []byte, m rawobject.Meta) any
)
