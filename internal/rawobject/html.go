package rawobject

import "bytes"

// AppendCutUnescapingHTML is AppendCut, with every \u003c, \u003e and
// \u0026 escape written as the character it stands for (<, > and &).
// encoding/json writes those characters escaped, and so does the API
// server; an event writer that does not (internal/jsonenc) gets from it
// the object's text, unchanged, in up to six times fewer bytes for those
// characters. Other escapes are left as they are. data must be the bytes
// m was scanned from.
func (m *Meta) AppendCutUnescapingHTML(dst, data []byte) []byte {
	done := 0
	for k := range m.managed.n {
		sp := m.managed.at(k)
		dst = m.AppendUnescapedHTML(dst, data[done:sp.Start])
		done = sp.End
	}
	return m.AppendUnescapedHTML(dst, data[done:])
}

// AppendUnescapedHTML is the package's AppendUnescapedHTML for src, a run
// of the bytes m was scanned from: when the scan met none of the escapes
// it rewrites, src is copied in one move, without looking for them.
func (m *Meta) AppendUnescapedHTML(dst, src []byte) []byte {
	if m.plain {
		return append(dst, src...)
	}
	return appendUnescapingHTML(dst, src)
}

// AppendUnescapedHTML appends src, a valid JSON text (or a run of one
// that starts and ends outside strings), with its \u003c, \u003e and \u0026
// escapes written as <, > and &, as AppendCutUnescapingHTML writes them.
func AppendUnescapedHTML(dst, src []byte) []byte { return appendUnescapingHTML(dst, src) }

// appendUnescapingHTML is AppendUnescapedHTML. In valid JSON a backslash
// is always inside a string, where it starts an escape of two bytes (or
// six, for \u): taking escapes whole, a "\\" never lends its second
// backslash to a following "u003c".
func appendUnescapingHTML(dst, src []byte) []byte {
	for {
		i := bytes.IndexByte(src, '\\')
		if i < 0 || i+1 >= len(src) {
			return append(dst, src...)
		}
		dst = append(dst, src[:i]...)
		if src[i+1] == 'u' && i+6 <= len(src) && src[i+2] == '0' && src[i+3] == '0' {
			if c, ok := htmlEscaped(src[i+4], src[i+5]); ok {
				dst = append(dst, c)
				src = src[i+6:]
				continue
			}
		}
		dst = append(dst, src[i], src[i+1])
		src = src[i+2:]
	}
}

// htmlEscaped is the character of the escape \u00XY, when it is one of
// those encoding/json escapes for HTML.
func htmlEscaped(x, y byte) (byte, bool) {
	switch {
	case x == '3' && (y == 'c' || y == 'C'):
		return '<', true
	case x == '3' && (y == 'e' || y == 'E'):
		return '>', true
	case x == '2' && y == '6':
		return '&', true
	}
	return 0, false
}
