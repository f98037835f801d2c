package pipeline

import "github.com/kubebus/bridge/source"

// coalesce collapses consecutive deltas of the same object (same uid) into
// one that carries the latest state:
//
//	added   + updated -> added   (latest state)
//	updated + updated -> updated (latest state, first old state)
//	any     + deleted -> deleted
//
// The merged delta is the later one's in everything else: its object, its
// state in the view (View) and, for a delete, its Reason, so an object
// that left the filter is still reported so.
//
// Deltas of different uids (an object deleted and created again under the
// same name) are never merged, so each incarnation keeps its own events.
func coalesce(ds []source.Delta) []source.Delta {
	out := ds[:0]
	for _, d := range ds {
		if n := len(out); n > 0 {
			if merged, ok := merge(out[n-1], d); ok {
				out[n-1] = merged
				continue
			}
		}
		out = append(out, d)
	}
	clear(ds[len(out):]) // let the collapsed objects be collected
	return out
}

func merge(a, b source.Delta) (source.Delta, bool) {
	if a.UID != b.UID || a.Type == source.Deleted {
		return source.Delta{}, false
	}
	m := b
	m.Snapshot = a.Snapshot || b.Snapshot
	switch b.Type {
	case source.Deleted:
	case source.Updated:
		if a.Type == source.Added {
			m.Type = source.Added
			m.OldObject = nil
		} else {
			m.OldObject = a.OldObject
		}
	default:
		return source.Delta{}, false
	}
	return m, true
}
