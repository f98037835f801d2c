package rawobject

import "math"

// maxMembers is how many members of an object Scan notes. Kubernetes
// objects have a few: apiVersion, kind, metadata, spec and status for
// most; a ConfigMap or a Secret six at most. An object with more (a
// core Event has a dozen) is walked, as when the members are unknown.
const maxMembers = 8

// members are where an object's own members lie in the bytes scanned,
// in order, as Scan found them: Meta.Extract and Meta.Project go
// straight to the members their paths name, and pass over the others
// without looking at their bytes.
type members struct {
	at [maxMembers]member
	n  uint8
	// ok is set when at holds all the object's members: at most
	// maxMembers, none with an escape in its key (the key's bytes are
	// its name), all within 4 GiB. The zero members are not ok: a Meta
	// that was not scanned has none.
	ok bool
}

// member is one member's offsets: its key's opening quote, its value's
// first byte, and the offset just after its value.
type member struct{ key, value, end uint32 }

// add notes a member; escaped tells whether its key has escapes.
func (ms *members) add(key, value, end int, escaped bool) {
	if !ms.ok {
		return
	}
	if escaped || int(ms.n) == maxMembers || end > math.MaxUint32 {
		ms.ok = false
		return
	}
	ms.at[ms.n] = member{uint32(key), uint32(value), uint32(end)}
	ms.n++
}

// shift moves every member back by d bytes, as spans.shift.
func (ms *members) shift(d int) {
	for k := range ms.n {
		ms.at[k].key -= uint32(d)
		ms.at[k].value -= uint32(d)
		ms.at[k].end -= uint32(d)
	}
}

// list is the members noted, when they are all of data's object's and
// lie where they can (in order, apart, and within the object at
// [lo, hi), which they must be for bytes the Meta was scanned from);
// nil and false otherwise, and the caller walks the object.
func (ms *members) list(data []byte, lo, hi int) ([]member, bool) {
	if !ms.ok || lo >= hi || hi > len(data) || data[lo] != '{' || data[hi-1] != '}' {
		return nil, false
	}
	list := ms.at[:ms.n]
	done := lo + 1
	for _, mb := range list {
		key, value, end := int(mb.key), int(mb.value), int(mb.end)
		if key < done || value < key+2 || end <= value || end >= hi || data[key] != '"' {
			return nil, false
		}
		done = end
	}
	return list, true
}

// name is the key of mb, a member of data that list returned: the bytes
// between its quotes, found back from its value over the colon and
// whitespace. ok is false when they are not there.
func (mb member) name(data []byte) (name []byte, ok bool) {
	i := int(mb.value) - 1
	for i > int(mb.key) && isSpace(data[i]) {
		i--
	}
	if i <= int(mb.key) || data[i] != ':' {
		return nil, false
	}
	for i--; i > int(mb.key) && isSpace(data[i]); i-- {
	}
	if i <= int(mb.key) || data[i] != '"' {
		return nil, false
	}
	return data[mb.key+1 : i], true
}

// projected is list, the members of the object data[lo:hi], as they lie
// in the copy of it less the spans of cut (in order, within it): a
// member whose key is cut is gone, the others move back by what is cut
// before them. Spans cut inside a member's value leave it where it is.
// The result is not ok when a span cuts a member kept otherwise than
// whole: list and cut are not of the same object.
func projected(list []member, lo int, cut []Span) members {
	out := members{ok: true}
	k, removed := 0, 0
	// at is where offset p goes; in tells whether a span cuts the byte
	// at p (with key) or the boundary before it.
	at := func(p int, key bool) (q int, in bool) {
		for k < len(cut) && cut[k].End <= p {
			removed += cut[k].End - cut[k].Start
			k++
		}
		in = k < len(cut) && (cut[k].Start < p || key && cut[k].Start == p)
		return p - lo - removed, in
	}
	for _, mb := range list {
		key, gone := at(int(mb.key), true)
		if gone {
			continue
		}
		value, in := at(int(mb.value), true)
		end, in2 := at(int(mb.end), false)
		if in || in2 || key < 0 {
			return members{}
		}
		out.at[out.n] = member{uint32(key), uint32(value), uint32(end)}
		out.n++
	}
	return out
}
