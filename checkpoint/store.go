package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Position is where one object stands in the published stream.
type Position struct {
	UID             string `json:"uid"`
	ResourceVersion string `json:"rv"`
	// View is the object's state in the view the bridge published it
	// through (which filter and projection, and a hash of what was
	// published), opaque to the checkpoint; "" when no view was applied.
	// It is stored only when set, so a position without one is stored,
	// and loads, as every earlier release has stored it.
	View string `json:"view,omitempty"`
}

// Record is one acknowledged delta.
//
// Resource is a stable resource name such as "configmaps" or
// "deployments.apps" (group-resource, no version). Key is "namespace/name",
// or "name" for cluster-scoped objects. Deleted removes the key; its
// ResourceVersion still counts toward the resource's LastResourceVersion.
type Record struct {
	Resource string
	Key      string
	Position
	Deleted bool
}

// Snapshot is what a Store holds for one resource.
type Snapshot struct {
	// Objects maps each object's key to its last published position.
	Objects map[string]Position
	// LastResourceVersion is the highest resourceVersion committed for the
	// resource, or "" if none was.
	LastResourceVersion string
}

// Store persists checkpoints. Implementations are safe for concurrent use.
// Errors they return start with "checkpoint: ".
type Store interface {
	// Load returns what is stored for resource: an empty Snapshot with a
	// non-nil Objects map when nothing is.
	Load(ctx context.Context, resource string) (Snapshot, error)
	// Commit applies all records atomically, in order, so a later record for
	// the same key wins. It also advances LastResourceVersion of every
	// resource it touches. A failed Commit applies nothing. An error for
	// which IsTerminal reports true is final: no later Commit succeeds.
	Commit(ctx context.Context, records []Record) error
	// Close releases the Store.
	Close() error
}

// Lister is implemented by stores that can name the resources they hold
// positions of, so that the bridge finds the resources it published
// before and no longer watches (a CRD deleted while it was down).
type Lister interface {
	// Resources returns the resources that hold at least one object's
	// position, in no set order.
	Resources(ctx context.Context) ([]string, error)
}

// validate reports why r cannot be stored, naming it by its position i in
// a batch.
func (r Record) validate(i int) error {
	switch {
	case r.Resource == "":
		return fmt.Errorf("checkpoint: record %d (key %q): %w", i, r.Key, errEmptyResource)
	case r.Key == "":
		return fmt.Errorf("checkpoint: record %d (resource %q): %w", i, r.Resource, errEmptyKey)
	}
	return nil
}

var (
	errEmptyResource = errors.New("empty resource name")
	errEmptyKey      = errors.New("empty key")
)

func emptySnapshot() Snapshot {
	return Snapshot{Objects: map[string]Position{}}
}

// DecodePosition decodes a Position as every Store writes it,
// {"uid":"…","rv":"…"}, with "view":"…" as well when it has a View. A value that is not such an object, or that has no
// uid, is an error: every object has a UID, and a position without one
// would be taken for an object that was replaced.
func DecodePosition(b []byte) (Position, error) {
	var p Position
	if err := json.Unmarshal(b, &p); err != nil {
		return Position{}, fmt.Errorf("decode position: %w", err)
	}
	if p.UID == "" {
		return Position{}, fmt.Errorf("decode position %.40q: no uid", b)
	}
	return p, nil
}
