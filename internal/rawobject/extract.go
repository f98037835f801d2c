package rawobject

import (
	"math"
	"strconv"
)

// Extract decodes the members of data that lie on t's paths, and nothing
// else, into the values unstructured objects hold: objects as
// map[string]any, lists as []any, integers as int64, other numbers as
// float64 (a number out of float64's range is an error, as for
// unstructured), strings, bools and nil. data must be one JSON object
// that Scan accepted.
//
// The result has data's nesting. A path that ends on a member decodes
// its whole value. Along a path, an object is entered by a name step and
// a list by Each, whose items are decoded in order; a value that the
// next step cannot enter (a list under a name step, an object under
// Each, a string) is left out, with its member or its list item. An
// object entered keeps only the members on the paths, and may be empty:
// a filter that asks for spec.x of an object whose spec lacks x finds
// spec, and no x in it, as it would in the whole object. Of duplicate
// keys the last wins, as in encoding/json. The top-level
// metadata.managedFields is never decoded: the bridge cuts it from what
// a filter sees.
//
// Extract goes over data once. What is off the paths is skimmed (see
// skim.go), not decoded: only the values returned cost allocations.
// Meta.Extract does the same without going over what is off the paths.
func Extract(data []byte, t *Tree) (map[string]any, error) {
	return extract(data, t, nil)
}

// Extract is the package's Extract for data, the bytes m was scanned
// from, and returns the same. It goes straight to the object's members
// that t's paths name, from where Scan found them, and walks only
// inside those; metadata.managedFields, when a path enters metadata, is
// passed over from where Scan found it. Its cost is that of the members
// on the paths, whatever the size of the others. An object whose
// members Scan did not note (more than 8 of them, or a key with
// escapes) is walked as Extract walks it. For bytes other than those m
// was scanned from, the result is unspecified, but Extract neither
// panics nor loops.
func (m *Meta) Extract(data []byte, t *Tree) (map[string]any, error) {
	lo, hi := trimSpace(data)
	list, ok := m.members.list(data, lo, hi)
	if !ok {
		return extract(data, t, m)
	}
	n := &noNode
	if t != nil {
		n = whole(&t.root)
	}
	x := extractor{s: scanner{data: data}, m: m}
	var obj map[string]any
	if n != nil {
		obj = make(map[string]any, len(n.names))
	} else {
		obj = make(map[string]any, len(list))
	}
	for _, mb := range list {
		name, ok := mb.name(data)
		if !ok {
			return extract(data, t, m)
		}
		c := n
		if n != nil {
			if c = n.names[string(name)]; c == nil {
				continue
			}
		}
		v, _, ok, err := x.value(int(mb.value), whole(c), childLevel(levelTop, name), 1)
		if err != nil {
			return nil, err
		}
		var key string
		if c != nil {
			key = c.key // no need to allocate it
		} else {
			key = string(name)
		}
		if ok {
			obj[key] = v
		} else {
			delete(obj, key) // an earlier duplicate
		}
	}
	return obj, nil
}

// extract is Extract; m, when not nil, is the Meta of data, whose spans
// of managedFields it passes over.
func extract(data []byte, t *Tree, m *Meta) (map[string]any, error) {
	x := extractor{s: scanner{data: data}, m: m}
	root := &noNode
	if t != nil {
		root = whole(&t.root)
	}
	i := x.s.ws(0)
	if i >= len(data) || data[i] != '{' {
		return nil, unexpected(data, i, "looking for the beginning of an object")
	}
	v, _, err := x.object(i, root, levelTop, 1)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// trimSpace is where the bytes of data that are not whitespace around
// it start and end.
func trimSpace(data []byte) (lo, hi int) {
	hi = len(data)
	for lo < hi && isSpace(data[lo]) {
		lo++
	}
	for hi > lo && isSpace(data[hi-1]) {
		hi--
	}
	return lo, hi
}

// The levels where a member means something of its own.
const (
	levelTop   = iota // the object's own members
	levelMeta         // the members of the top-level metadata
	levelOther        // any other
)

// childLevel is the level of the members of the value of member name at
// level.
func childLevel(level int, name []byte) int {
	if level == levelTop && string(name) == "metadata" {
		return levelMeta
	}
	return levelOther
}

type extractor struct {
	s scanner
	// m, when not nil, is the Meta of s.data.
	m *Meta
	// scratch holds a key or a string decoded, made when one has escapes.
	scratch []byte
}

// value decodes the value at i (its first byte) along n, nil meaning the
// whole value; ok is false when n cannot enter it.
func (x *extractor) value(i int, n *node, level, depth int) (v any, end int, ok bool, err error) {
	d := x.s.data
	if n != nil {
		switch {
		case d[i] == '{' && len(n.names) > 0:
			v, end, err = x.object(i, n, level, depth+1)
			return v, end, err == nil, err
		case d[i] == '[' && n.each != nil:
			v, end, err = x.list(i, n.each, depth+1)
			return v, end, err == nil, err
		}
		end, err = x.s.skim(i)
		return nil, end, false, err
	}
	switch c := d[i]; c {
	case '{':
		v, end, err = x.object(i, nil, level, depth+1)
	case '[':
		v, end, err = x.list(i, nil, depth+1)
	case '"':
		v, end, err = x.string(i)
	case 't':
		v = true
		end, err = x.s.literal(i, "true")
	case 'f':
		v = false
		end, err = x.s.literal(i, "false")
	case 'n':
		end, err = x.s.literal(i, "null")
	default:
		v, end, err = x.number(i)
	}
	return v, end, err == nil, err
}

// object decodes the object at i along n (nil: all of it), whose
// members are at level, at depth.
func (x *extractor) object(i int, n *node, level, depth int) (map[string]any, int, error) {
	if depth > MaxDepth {
		return nil, i, errAt(i, "nesting deeper than 10000 levels")
	}
	var obj map[string]any
	if n != nil {
		obj = make(map[string]any, len(n.names))
	} else {
		obj = make(map[string]any)
	}
	i, empty := x.s.openContainer(i, '}')
	if empty {
		return obj, i, nil
	}
	for {
		name, keyStart, vs, err := x.s.member(i, &x.scratch)
		if err != nil {
			return nil, vs, err
		}
		c := n
		if n != nil {
			c = n.names[string(name)]
		}
		if level == levelMeta && string(name) == "managedFields" {
			i, err = x.m.skimManagedFields(&x.s, keyStart, vs)
		} else if n != nil && c == nil {
			i, err = x.s.skim(vs)
		} else {
			var key string
			if c != nil {
				key = c.key // no need to allocate it
			} else {
				key = string(name)
			}
			var v any
			var ok bool
			v, i, ok, err = x.value(vs, whole(c), childLevel(level, name), depth)
			if ok {
				obj[key] = v
			} else {
				delete(obj, key) // an earlier duplicate
			}
		}
		if err != nil {
			return nil, i, err
		}
		var more bool
		if i, more, err = x.s.next(i); err != nil {
			return nil, i, err
		} else if !more {
			return obj, i, nil
		}
	}
}

// list decodes the list at i, each item along item (nil: all of it), at
// depth.
func (x *extractor) list(i int, item *node, depth int) ([]any, int, error) {
	if depth > MaxDepth {
		return nil, i, errAt(i, "nesting deeper than 10000 levels")
	}
	items := []any{}
	i, empty := x.s.openContainer(i, ']')
	if empty {
		return items, i, nil
	}
	item = whole(item)
	for {
		if i = x.s.ws(i); i >= len(x.s.data) {
			return nil, i, unexpected(x.s.data, i, "looking for the beginning of a value")
		}
		v, end, ok, err := x.value(i, item, levelOther, depth)
		if err != nil {
			return nil, end, err
		}
		if ok {
			items = append(items, v)
		}
		var more bool
		if i, more, err = x.s.nextItem(end); err != nil {
			return nil, i, err
		} else if !more {
			return items, i, nil
		}
	}
}

// string decodes the string whose opening quote is at i, as encoding/json
// does.
func (x *extractor) string(i int) (string, int, error) {
	end, escaped, err := x.s.skipString(i)
	if err != nil {
		return "", end, err
	}
	raw := x.s.data[i+1 : end-1]
	if escaped {
		x.scratch = appendUnquoted(x.scratch[:0], raw)
		raw = x.scratch
	}
	return string(raw), end, nil
}

// number decodes the number at i as the unstructured decoder does: an
// int64 when it is an integer in int64's range, else a float64.
func (x *extractor) number(i int) (any, int, error) {
	end, err := x.s.skipNumber(i)
	if err != nil {
		return nil, end, err
	}
	text := x.s.data[i:end]
	if n, ok := parseInt64(text); ok {
		return n, end, nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, end, errAt(i, "number "+string(text)+" out of the range of float64")
	}
	return f, end, nil
}

// parseInt64 parses an integer as the JSON grammar writes it
// (-?(0|[1-9][0-9]*)), when it fits an int64.
func parseInt64(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if !isDigit(c) || u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return -int64(u), true // -(1<<63) wraps to itself: MinInt64
	}
	return 0, false
}
