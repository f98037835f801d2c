package consumer

// deletedCap bounds how many deletions a ListerWatcher remembers to stop
// late repeats of deleted objects. It covers a bridge's replay after a
// crash (its unacknowledged batch, at most a few thousand events) many
// times over, for about 400 KiB per ListerWatcher.
const deletedCap = 8192

// deleted remembers the latest deletions per object key, in a bounded
// space: the oldest is forgotten first. Keys are kept as hashes.
type deleted struct {
	byKey map[uint64]deletion
	ring  []uint64
	next  int
}

// deletion is the state in which an object was deleted.
type deletion struct {
	uid uid
	rv  apiRV
}

func newDeleted() *deleted {
	return &deleted{byKey: make(map[uint64]deletion)}
}

// add remembers that the object of key, uid u, was deleted at rv.
func (d *deleted) add(key string, u uid, rv apiRV) {
	h := hashKey(key)
	if _, ok := d.byKey[h]; !ok {
		if len(d.ring) < deletedCap {
			d.ring = append(d.ring, h)
		} else {
			delete(d.byKey, d.ring[d.next])
			d.ring[d.next] = h
			d.next = (d.next + 1) % deletedCap
		}
	}
	d.byKey[h] = deletion{uid: u, rv: rv}
}

// stale reports whether a state (u, rv) of the object of key comes from
// before its remembered deletion: the deleted uid itself (a uid never
// comes back), or another uid with an older resourceVersion.
func (d *deleted) stale(key string, u uid, rv apiRV) bool {
	del, ok := d.byKey[hashKey(key)]
	if !ok {
		return false
	}
	if del.uid == u {
		return true
	}
	c, ok := rv.compare(del.rv)
	return ok && c < 0
}
