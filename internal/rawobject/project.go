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
// The projection is data less the members it leaves out, at the byte
// level: each run of members (or list items) left out goes with the
// commas that separated it, as AppendCut cuts managedFields, and every
// other byte is copied as it is (with \u003c, \u003e and \u0026 written
// as AppendUnescapedHTML writes them; whitespace around the object left
// out). What is left out:
//
//   - Never the identity members: apiVersion, kind, and metadata's
//     name, namespace, uid, resourceVersion and deletionTimestamp, where
//     the top-level metadata is an object.
//   - metadata.managedFields, unless KeepManagedFields.
//   - With Keep, every member whose key is on no path. Where a path
//     ends, the value is kept whole; before that, the value is entered as
//     Extract enters it: an object keeps only its members on the path
//     (and stays, even when none is), a list by Each keeps each item so
//     projected, in order; a value the next step cannot enter is left
//     out, with its member or list item.
//   - With Drop, every member at the end of a path; before that, objects
//     and lists are entered as for Keep, and the rest is kept. Both
//     together keep what Keep keeps and Drop does not drop.
//
// The projection is valid JSON, and decodes to the value described,
// except for objects with duplicate keys, whose members are projected
// one by one (the API server never sends them).
//
// The Meta returned describes the projection as Scan would: m's
// identity, the managedFields spans of the projection (none, unless
// KeepManagedFields), no escape left for AppendUnescapedHTML to
// rewrite, and where the projection's members lie (when m has its
// object's, and the object has no escape for AppendUnescapedHTML to
// rewrite; otherwise none, and the projection's Extract and Project
// walk it). The hash is the xxhash64 of the projection as it would be
// without its metadata.resourceVersion member, whose value changes on
// every write: two states of an object that differ only in their
// resourceVersion, or in members left out, have the same hash.
//
// Project goes straight to the object's members from where Scan found
// them: it copies or leaves out whole those its paths do not enter,
// without looking at them, and walks only inside the others, skimming
// what it copies or leaves out whole in them (see skim.go); a metadata
// it keeps whole (less managedFields) it does not walk either. An
// object whose members Scan did not note is walked whole, with the same
// result. Project allocates nothing when dst has room and fewer than 17
// runs are left out, and grows dst once when it has not. For bytes
// other than those m was
// scanned from, the result is unspecified, but Project neither panics
// nor loops; it returns dst unchanged, a zero Meta and hash when it finds
// them malformed.
func (m *Meta) Project(dst, data []byte, p *Projection) (out []byte, meta Meta, hash uint64) {
	w := projector{m: m}
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
	lo := w.s.ws(0)
	if lo >= len(data) || data[lo] != '{' {
		return dst, Meta{}, 0
	}
	if keep == nil && drop == nil && !w.keepMF {
		// All but managedFields: the spans the scan found.
		return m.appendCut(dst, data, lo)
	}
	_, hi := trimSpace(data)
	var err error
	if list, ok := m.members.list(data, lo, hi); ok {
		hi, err = w.members(list, hi, keep, drop)
	} else {
		hi, err = w.object(lo, keep, drop, levelTop)
	}
	if err != nil {
		return dst, Meta{}, 0
	}
	cut, unhashed := w.cut.list(), w.unhashed.list()
	if !within(cut, lo, hi) || !within(unhashed, lo, hi) {
		return dst, Meta{}, 0
	}
	return m.appendProjection(dst, data, lo, hi, cut, unhashed, w.keepMF)
}

// appendCut is Project with the zero Projection, for data whose object
// starts at lo: the spans the scan found.
func (m *Meta) appendCut(dst, data []byte, lo int) ([]byte, Meta, uint64) {
	hi := len(data)
	for hi > lo && isSpace(data[hi-1]) {
		hi--
	}
	var cutBuf, unhashedBuf [4]Span
	cut, unhashed := m.managed.appendTo(cutBuf[:0]), m.unhashed.appendTo(unhashedBuf[:0])
	if !within(cut, lo, hi) || !within(unhashed, lo, hi) {
		return dst, Meta{}, 0
	}
	return m.appendProjection(dst, data, lo, hi, cut, unhashed, false)
}

// appendProjection appends the object data[lo:hi] less the spans of cut
// to dst, and returns the extended buffer, its Meta, and the hash of the
// object less the spans of unhashed.
func (m *Meta) appendProjection(dst, data []byte, lo, hi int, cut, unhashed []Span, keepMF bool) ([]byte, Meta, uint64) {
	// The ends of the spans not hashed, where the projection has them.
	var markBuf [8]int
	marks := markBuf[:0]
	for _, sp := range unhashed {
		marks = append(marks, sp.Start, sp.End)
	}
	// One allocation at most: the projection is no longer than the
	// object less what is cut.
	n := hi - lo
	for _, sp := range cut {
		n -= sp.End - sp.Start
	}
	if cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	start := len(dst)
	done, k := lo, 0
	for j := 0; j <= len(cut); j++ {
		segEnd, next := hi, hi
		if j < len(cut) {
			segEnd, next = cut[j].Start, cut[j].End
		}
		for ; k < len(marks) && marks[k] <= segEnd; k++ {
			if marks[k] > done {
				dst = m.AppendUnescapedHTML(dst, data[done:marks[k]])
				done = marks[k]
			}
			marks[k] = len(dst) - start
		}
		dst = m.AppendUnescapedHTML(dst, data[done:segEnd])
		done = next
	}
	meta := *m
	meta.managed, meta.unhashed, meta.members = spans{}, spans{}, members{}
	meta.plain = true
	if list, ok := m.members.list(data, lo, hi); ok && m.plain {
		meta.members = projected(list, lo, cut)
	}
	for j := 0; j+1 < len(marks); j += 2 {
		if marks[j] < marks[j+1] {
			meta.unhashed.add(Span{marks[j], marks[j+1]})
		}
	}
	if keepMF && m.managed.n > 0 {
		// Rare: the spans of what is kept of managedFields, and their runs
		// with resourceVersion's, are those of the projection's own scan.
		if again, err := Scan(dst[start:]); err == nil {
			meta.managed, meta.unhashed, meta.members = again.managed, again.unhashed, again.members
		}
	}
	return dst, meta, m.hashLeavingOut(data, lo, hi, unhashed)
}

// Hash is the hash Project returns for data with the zero Projection:
// the xxhash64 of data as AppendCutUnescapingHTML writes it (whitespace
// around the object left out) without its metadata.resourceVersion
// member, cut as AppendCut cuts managedFields. It hashes data's pieces
// as they lie, from the spans Scan found, allocating nothing. data must
// be the bytes m was scanned from; for others the hash is unspecified.
func (m *Meta) Hash(data []byte) uint64 {
	lo, hi := trimSpace(data)
	var buf [4]Span
	unhashed := m.unhashed.appendTo(buf[:0])
	if !within(unhashed, lo, hi) {
		return 0
	}
	return m.hashLeavingOut(data, lo, hi, unhashed)
}

// projector finds the spans of an object's projection.
type projector struct {
	s      scanner
	m      *Meta
	keepMF bool
	// cut are the spans of data the projection leaves out; unhashed those
	// its hash leaves out: the same, but for the runs of the top-level
	// metadata's members, where resourceVersion counts as left out.
	cut, unhashed spanList
	// scratch holds a key decoded, made when one has escapes.
	scratch []byte
}

// An action is what becomes of a member or an item.
type action int

const (
	leaveOut action = iota
	copyWhole
	enter
)

// runs notes the spans to leave out of an object's members (or a list's
// items), as the scan notes managedFields: a run of members left out
// goes from its first key to the next member kept, or, when none follows,
// from the end of the last member kept before it (or from its first key,
// when none was).
type runs struct {
	spans                     *spanList
	keptEnd, runStart, runEnd int
}

func newRuns(sp *spanList) runs { return runs{spans: sp, keptEnd: -1, runStart: -1, runEnd: -1} }

// begin notes a member that starts at start, before what is in it.
func (r *runs) begin(start int, out bool) {
	switch {
	case out && r.runStart < 0:
		r.runStart = start
	case !out && r.runStart >= 0:
		r.spans.add(Span{r.runStart, start})
		r.runStart = -1
	}
}

// end notes where the member begun ends.
func (r *runs) end(end int, out bool) {
	if out {
		r.runEnd = end
	} else {
		r.keptEnd = end
	}
}

// finish notes the end of the object or list.
func (r *runs) finish() {
	if r.runStart >= 0 {
		if r.keptEnd >= 0 {
			r.runStart = r.keptEnd
		}
		r.spans.add(Span{r.runStart, r.runEnd})
	}
}

// object projects the object at i (its opening brace) along keep and
// drop, its members being at level, and returns the offset after it.
func (w *projector) object(i int, keep, drop *node, level int) (int, error) {
	s := &w.s
	i, empty := s.openContainer(i, '}')
	if empty {
		return i, nil
	}
	cut, unhashed := newRuns(&w.cut), newRuns(&w.unhashed)
	for {
		name, keyStart, vs, err := s.member(i, &w.scratch)
		if err != nil {
			return vs, err
		}
		kc, dc, act := w.decide(name, keep, drop, level, s.data[vs])
		out := act == leaveOut
		// resourceVersion is kept, but not hashed.
		outOfHash := out || level == levelMeta && string(name) == "resourceVersion"
		cut.begin(keyStart, out)
		unhashed.begin(keyStart, outOfHash)
		var end int
		switch {
		case act == enter:
			end, err = w.value(vs, kc, dc, childLevel(level, name))
		case level == levelMeta && out && string(name) == "managedFields":
			end, err = w.m.skimManagedFields(s, keyStart, vs)
		default:
			end, err = s.skim(vs)
		}
		if err != nil {
			return end, err
		}
		cut.end(end, out)
		unhashed.end(end, outOfHash)
		var more bool
		if i, more, err = s.next(end); err != nil {
			return i, err
		} else if !more {
			cut.finish()
			unhashed.finish()
			return i, nil
		}
	}
}

// members projects the object whose members are list, as Scan found
// them, and which ends at hi, along keep and drop, as object does, and
// returns hi. It goes from member to member, and walks only inside those
// it enters: the others it copies or leaves out whole. A metadata kept
// whole is not walked either: its managedFields and resourceVersion are
// where the scan found them.
func (w *projector) members(list []member, hi int, keep, drop *node) (int, error) {
	d := w.s.data
	cut, unhashed := newRuns(&w.cut), newRuns(&w.unhashed)
	for _, mb := range list {
		key, value, end := int(mb.key), int(mb.value), int(mb.end)
		name, ok := mb.name(d)
		if !ok {
			return key, errAt(key, "the object's members are not where its Meta has them")
		}
		kc, dc, act := w.decide(name, keep, drop, levelTop, d[value])
		out := act == leaveOut
		cut.begin(key, out)
		unhashed.begin(key, out)
		switch {
		case act != enter:
		case kc == nil && dc == nil && !w.keepMF && string(name) == "metadata":
			w.cut.addWithin(&w.m.managed, value, end)
			w.unhashed.addWithin(&w.m.unhashed, value, end)
		default:
			if e, err := w.value(value, kc, dc, childLevel(levelTop, name)); err != nil || e != end {
				return e, errAt(e, "the object's members are not where its Meta has them")
			}
		}
		cut.end(end, out)
		unhashed.end(end, out)
	}
	cut.finish()
	unhashed.finish()
	return hi, nil
}

// skimManagedFields returns the end of the managedFields member of the
// top-level metadata whose key is at keyStart and value at value, in the
// bytes m was scanned from, from the span the scan found: the value ends
// where the span's last run of commas and whitespace starts, or at the
// span's end. Members are left out in runs, so that when the span holds
// more managedFields members, ending at the last is as good. Without m,
// or a span that holds the member, the value is skimmed.
func (m *Meta) skimManagedFields(s *scanner, keyStart, value int) (int, error) {
	if m != nil {
		for k := range m.managed.n {
			sp := m.managed.at(k)
			if sp.Start <= keyStart && keyStart < sp.End && sp.End <= len(s.data) {
				end := sp.End
				for end > value && (isSpace(s.data[end-1]) || s.data[end-1] == ',') {
					end--
				}
				if end > value {
					return end, nil
				}
			}
		}
	}
	return s.skim(value)
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
	i, empty := s.openContainer(i, ']')
	if empty {
		return i, nil
	}
	cut, unhashed := newRuns(&w.cut), newRuns(&w.unhashed)
	for {
		if i = s.ws(i); i >= len(s.data) {
			return i, unexpected(s.data, i, "looking for the beginning of a value")
		}
		act := leaveOut
		if di == nil || !di.leaf {
			act = along(ki, di, s.data[i])
		}
		out := act == leaveOut
		cut.begin(i, out)
		unhashed.begin(i, out)
		var end int
		var err error
		if act == enter {
			end, err = w.value(i, ki, di, levelOther)
		} else {
			end, err = s.skim(i)
		}
		if err != nil {
			return end, err
		}
		cut.end(end, out)
		unhashed.end(end, out)
		var more bool
		if i, more, err = s.nextItem(end); err != nil {
			return i, err
		} else if !more {
			cut.finish()
			unhashed.finish()
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
			// Entered even when all of it is kept: its managedFields, and
			// its resourceVersion for the hash, are cut from it.
			return whole(kc), dc, enter
		}
	case levelMeta:
		switch string(name) {
		case "name", "namespace", "uid", "resourceVersion", "deletionTimestamp":
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

// spanList is a list of spans that keeps its first 16 in place.
type spanList struct {
	n     int
	first [16]Span
	more  []Span // all of them, once there are more
}

func (l *spanList) add(sp Span) {
	switch {
	case l.more != nil:
		l.more = append(l.more, sp)
	case l.n < len(l.first):
		l.first[l.n] = sp
		l.n++
	default:
		l.more = append(append(make([]Span, 0, 4*len(l.first)), l.first[:]...), sp)
	}
}

// addWithin adds the spans of c that lie within [lo, hi).
func (l *spanList) addWithin(c *spans, lo, hi int) {
	for k := range c.n {
		if sp := c.at(k); sp.Start >= lo && sp.End <= hi {
			l.add(sp)
		}
	}
}

func (l *spanList) list() []Span {
	if l.more != nil {
		return l.more
	}
	return l.first[:l.n]
}

// appendTo appends the spans to dst, and returns the extended slice.
func (c *spans) appendTo(dst []Span) []Span {
	for k := range c.n {
		dst = append(dst, c.at(k))
	}
	return dst
}

// within reports whether the spans are in order, apart, and within
// [lo, hi): true for those found in the bytes of an object there.
func within(list []Span, lo, hi int) bool {
	done := lo
	for _, sp := range list {
		if sp.Start < done || sp.End < sp.Start || sp.End > hi {
			return false
		}
		done = sp.End
	}
	return true
}

// hashLeavingOut is the xxhash64 of data[lo:hi], a run of the bytes m was
// scanned from, without the spans of cut (within it), as
// AppendUnescapedHTML writes it.
func (m *Meta) hashLeavingOut(data []byte, lo, hi int, cut []Span) uint64 {
	if len(cut) == 0 && m.plain {
		return xxhash.Sum64(data[lo:hi])
	}
	var d xxhash.Digest
	d.Reset()
	done := lo
	for _, sp := range cut {
		m.hashUnescapedHTML(&d, data[done:sp.Start])
		done = sp.End
	}
	m.hashUnescapedHTML(&d, data[done:hi])
	return d.Sum64()
}

// hashUnescapedHTML writes src to d as m.AppendUnescapedHTML appends it.
func (m *Meta) hashUnescapedHTML(d *xxhash.Digest, src []byte) {
	if m.plain {
		_, _ = d.Write(src)
		return
	}
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
