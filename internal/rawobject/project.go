package rawobject

import (
	"bytes"

	"github.com/cespare/xxhash/v2"
)

// Projection says what of an object Project keeps. The zero Projection
// keeps everything but metadata.managedFields.
type Projection struct {
	// Keep, when not nil, keeps only the members on its paths, and the
	// identity members. A tree of no paths keeps only those.
	Keep *Tree
	// Drop, when not nil, leaves out the members on its paths, except the
	// identity members: dropping metadata leaves them alone in it.
	Drop *Tree
	// KeepManagedFields keeps metadata.managedFields (when Keep and Drop
	// let it through); otherwise it is left out.
	KeepManagedFields bool
}

// Project appends data's projection by p to dst, and returns the
// extended buffer, the Meta of the projection, and its hash. data must
// be the bytes m was scanned from; p nil is the zero Projection.
//
// The projection is data with members left out at the byte level, the
// rest copied as it is (with \u003c, \u003e and \u0026 written as
// AppendUnescapedHTML writes them):
//
//   - The identity members are always kept: apiVersion, kind, and
//     metadata's name, namespace, uid, resourceVersion and
//     deletionTimestamp, where the top-level metadata is an object.
//   - metadata.managedFields is left out, unless KeepManagedFields.
//   - With Keep, a member is kept when its key is on a path. Where the
//     path ends, its value is kept whole; before that, its value is
//     entered, as Extract enters it: an object keeps only its members on
//     the path (and stays, even when none is), a list by Each keeps each
//     item so projected, in order; a value the next step cannot enter is
//     left out, with its member or list item.
//   - With Drop, a member on the end of a path is left out; before that,
//     objects and lists are entered as for Keep, and the rest is kept.
//     Both together keep what Keep keeps and Drop does not drop.
//
// An object that was entered is written compact, its kept members
// separated by single commas; what is copied is copied as it is. For
// the compact JSON the API server sends, the projection is data less the
// members left out, byte for byte. It is valid JSON and decodes to the
// value described above, except for objects with duplicate keys, whose
// members are projected one by one (the API server never sends them).
//
// The Meta returned describes the projection as Scan would: m's
// identity, the managedFields spans of the projection (none, unless
// KeepManagedFields), and no escape AppendUnescapedHTML rewrites. The
// hash is the xxhash64 of the projection as it would be without its
// metadata.resourceVersion member, whose value changes on every write:
// two states of an object that differ only in their resourceVersion, or
// in left-out members, project with the same hash.
//
// Project goes over data once, skimming what it copies or leaves out
// (see skim.go), and allocates nothing when dst has room. For bytes
// other than those m was scanned from, the result is unspecified, but
// Project neither panics nor loops; it returns dst unchanged, a zero Meta
// and hash when it finds them malformed.
func (m *Meta) Project(dst, data []byte, p *Projection) (out []byte, meta Meta, hash uint64) {
	w := projector{m: m, out: dst, base: len(dst)}
	w.s.data = data
	var keep, drop *node
	if p != nil {
		if p.Keep != nil {
			keep = whole(&p.Keep.root)
		}
		if p.Drop != nil {
			drop = &p.Drop.root
		}
		w.keepMF = p.KeepManagedFields
	}
	if err := w.run(keep, drop); err != nil {
		return dst, Meta{}, 0
	}
	meta = *m
	meta.managed = w.managed
	meta.plain = true
	return w.out, meta, hashLeavingOut(w.out[w.base:], &w.hashCut)
}

// Hash is the hash Project returns for data with the zero Projection:
// the xxhash64 of data as AppendCutUnescapingHTML writes it (for the
// compact JSON the API server sends), without its
// metadata.resourceVersion member. It hashes the pieces of data, without
// writing the projection, and allocates nothing. data must be the bytes
// m was scanned from; for others the hash is unspecified (0 when they
// are found malformed).
func (m *Meta) Hash(data []byte) uint64 {
	w := projector{m: m, hashOnly: true, noRV: true}
	w.s.data = data
	w.d.Reset()
	if err := w.run(nil, nil); err != nil {
		return 0
	}
	return w.d.Sum64()
}

// projector writes an object's projection: into out, or, when hashOnly,
// into d.
type projector struct {
	s      scanner
	m      *Meta
	keepMF bool

	hashOnly bool
	d        xxhash.Digest
	// noRV leaves metadata.resourceVersion out.
	noRV bool

	out  []byte
	base int // where the projection starts in out
	// hashCut are the spans of the projection (from base) the hash leaves
	// out: metadata.resourceVersion, with the comma that goes with it.
	hashCut spans
	// managed are the spans of the projection that hold
	// metadata.managedFields, when kept.
	managed spans

	// scratch holds a key or a string decoded, made when one has escapes.
	scratch []byte
}

// An action is what becomes of a member or an item.
type action int

const (
	leaveOut action = iota
	copyWhole
	enter
)

func (w *projector) run(keep, drop *node) error {
	i := w.s.ws(0)
	if i >= len(w.s.data) || w.s.data[i] != '{' {
		return unexpected(w.s.data, i, "looking for the beginning of an object")
	}
	_, err := w.object(i, keep, drop, levelTop)
	return err
}

func (w *projector) emit(b []byte) {
	if w.hashOnly {
		if w.m.plain {
			_, _ = w.d.Write(b)
		} else {
			hashUnescapingHTML(&w.d, b)
		}
		return
	}
	w.out = w.m.AppendUnescapedHTML(w.out, b)
}

func (w *projector) emitString(s string) {
	if w.hashOnly {
		_, _ = w.d.WriteString(s)
		return
	}
	w.out = append(w.out, s...)
}

// pos is the offset in the projection written so far.
func (w *projector) pos() int { return len(w.out) - w.base }

// object projects the object at i (its opening brace) along keep and
// drop, its members being at level, and returns the offset after it.
func (w *projector) object(i int, keep, drop *node, level int) (int, error) {
	s := &w.s
	w.emitString("{")
	i, empty := s.openContainer(i, '}')
	if empty {
		w.emitString("}")
		return i, nil
	}
	first := true
	// In the top-level metadata, the spans of the members the hash leaves
	// out and of managedFields.
	track := level == levelMeta && !w.hashOnly
	hashCut := cutter{spans: &w.hashCut}
	managed := cutter{spans: &w.managed}
	for {
		name, keyStart, vs, err := s.member(i, &w.scratch)
		if err != nil {
			return vs, err
		}
		kc, dc, act := w.decide(name, keep, drop, level, s.data[vs])
		isRV := track && string(name) == "resourceVersion"
		isMF := track && w.keepMF && string(name) == "managedFields"
		var end int
		if act == leaveOut {
			end, err = s.skim(vs)
		} else {
			start, comma := w.pos(), -1
			if !first {
				comma = start
				w.emitString(",")
			}
			first = false
			if act == copyWhole {
				if end, err = s.skim(vs); err == nil {
					w.emit(s.data[keyStart:end])
				}
			} else {
				next := childLevel(level, name)
				w.emit(s.data[keyStart:vs])
				end, err = w.value(vs, kc, dc, next)
			}
			if track {
				hashCut.member(comma, start, w.pos(), isRV)
				if w.keepMF {
					managed.member(comma, start, w.pos(), isMF)
				}
			}
		}
		if err != nil {
			return end, err
		}
		var more bool
		if i, more, err = s.next(end); err != nil {
			return i, err
		} else if !more {
			w.emitString("}")
			return i, nil
		}
	}
}

// list projects the list at i (its opening bracket), each item along
// keep's and drop's Each nodes, and returns the offset after it.
func (w *projector) list(i int, keep, drop *node) (int, error) {
	s := &w.s
	var ki, di *node
	if keep != nil {
		ki = whole(keep.each)
	}
	if drop != nil {
		di = drop.each
	}
	w.emitString("[")
	i, empty := s.openContainer(i, ']')
	if empty {
		w.emitString("]")
		return i, nil
	}
	first := true
	for {
		if i = s.ws(i); i >= len(s.data) {
			return i, unexpected(s.data, i, "looking for the beginning of a value")
		}
		act := leaveOut
		if di == nil || !di.leaf {
			act = along(ki, di, s.data[i])
		}
		var end int
		var err error
		if act == leaveOut {
			end, err = s.skim(i)
		} else {
			if !first {
				w.emitString(",")
			}
			first = false
			if act == copyWhole {
				if end, err = s.skim(i); err == nil {
					w.emit(s.data[i:end])
				}
			} else {
				end, err = w.value(i, ki, di, levelOther)
			}
		}
		if err != nil {
			return end, err
		}
		var more bool
		if i, more, err = s.nextItem(end); err != nil {
			return i, err
		} else if !more {
			w.emitString("]")
			return i, nil
		}
	}
}

// value projects the object or list at i, which along said to enter.
func (w *projector) value(i int, keep, drop *node, level int) (int, error) {
	if w.s.data[i] == '{' {
		return w.object(i, keep, drop, level)
	}
	return w.list(i, keep, drop)
}

// noNode selects nothing: what Keep keeps of metadata when none of its
// paths goes there (its identity members only).
var noNode node

// decide says what becomes of the member name, whose value starts with
// c, of an object projected along keep and drop, and the nodes to
// follow into it.
func (w *projector) decide(name []byte, keep, drop *node, level int, c byte) (kc, dc *node, act action) {
	switch level {
	case levelTop:
		switch string(name) {
		case "apiVersion", "kind":
			return nil, nil, copyWhole
		case "metadata":
			if c != '{' {
				break
			}
			if keep != nil {
				if kc = keep.name(name); kc == nil {
					kc = &noNode
				}
			}
			if dc = drop; drop != nil && !drop.leaf {
				dc = drop.name(name)
			}
			return whole(kc), dc, enter
		}
	case levelMeta:
		switch string(name) {
		case "resourceVersion":
			if w.noRV {
				return nil, nil, leaveOut
			}
			return nil, nil, copyWhole
		case "name", "namespace", "uid", "deletionTimestamp":
			return nil, nil, copyWhole
		case "managedFields":
			if !w.keepMF {
				return nil, nil, leaveOut
			}
		}
	}
	if drop != nil {
		if drop.leaf {
			return nil, nil, leaveOut
		}
		if dc = drop.name(name); dc != nil && dc.leaf {
			return nil, nil, leaveOut
		}
	}
	if keep != nil {
		if kc = keep.name(name); kc == nil {
			return nil, nil, leaveOut
		}
		kc = whole(kc)
	}
	return kc, dc, along(kc, dc, c)
}

// along says what becomes of a value that starts with c, to be kept
// along kc (nil: all of it) and dropped along dc (nil: nothing of it).
func along(kc, dc *node, c byte) action {
	if kc == nil && dc == nil {
		return copyWhole
	}
	switch c {
	case '{':
		if kc != nil && len(kc.names) > 0 || kc == nil && len(dc.names) > 0 {
			return enter
		}
	case '[':
		if kc != nil && kc.each != nil || kc == nil && dc.each != nil {
			return enter
		}
	}
	if kc != nil {
		return leaveOut // the next step cannot enter it
	}
	return copyWhole // nothing to drop in it
}

// cutter notes the spans to leave out of an object written compact, so
// that what remains is the object without the members cut: each member
// cut with the comma before it, and the comma before the first member
// kept when only members cut precede it.
type cutter struct {
	spans *spans
	kept  bool
}

// member notes a member written at [start, end) of the projection, its
// comma first when comma is not negative.
func (c *cutter) member(comma, start, end int, cut bool) {
	switch {
	case cut:
		c.spans.addMerged(Span{start, end})
	case !c.kept:
		c.kept = true
		if comma >= 0 {
			c.spans.addMerged(Span{comma, comma + 1})
		}
	}
}

// addMerged adds sp, which starts at or after the end of the last span,
// joining it to the last when they touch.
func (c *spans) addMerged(sp Span) {
	switch {
	case c.n == 0:
		c.add(sp)
	case c.n == 1 && c.first.End == sp.Start:
		c.first.End = sp.End
	case c.n > 1 && c.more[c.n-2].End == sp.Start:
		c.more[c.n-2].End = sp.End
	default:
		c.add(sp)
	}
}

// hashLeavingOut is the xxhash64 of b without the spans of cut.
func hashLeavingOut(b []byte, cut *spans) uint64 {
	if cut.n == 0 {
		return xxhash.Sum64(b)
	}
	var d xxhash.Digest
	d.Reset()
	done := 0
	for k := range cut.n {
		sp := cut.at(k)
		_, _ = d.Write(b[done:sp.Start])
		done = sp.End
	}
	_, _ = d.Write(b[done:])
	return d.Sum64()
}

// hashUnescapingHTML writes src to d as appendUnescapingHTML appends it.
func hashUnescapingHTML(d *xxhash.Digest, src []byte) {
	for {
		i := bytes.IndexByte(src, '\\')
		if i < 0 || i+1 >= len(src) {
			_, _ = d.Write(src)
			return
		}
		if src[i+1] == 'u' && i+6 <= len(src) && src[i+2] == '0' && src[i+3] == '0' {
			if c, ok := htmlEscaped(src[i+4], src[i+5]); ok {
				_, _ = d.Write(src[:i])
				_, _ = d.WriteString(htmlChars[c])
				src = src[i+6:]
				continue
			}
		}
		_, _ = d.Write(src[:i+2])
		src = src[i+2:]
	}
}

// htmlChars are the characters htmlEscaped returns, as strings.
var htmlChars = [256]string{'<': "<", '>': ">", '&': "&"}
