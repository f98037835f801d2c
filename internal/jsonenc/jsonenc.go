// Package jsonenc writes JSON byte for byte as encoding/json writes it
// with HTML escaping off (an Encoder with SetEscapeHTML(false), without
// the newline), for the values that make up Kubernetes objects in
// unstructured form, several times faster and with a fraction of the
// allocations.
//
// Guarantees:
//
//   - AppendValue(dst, v) appends exactly those bytes, and fails where
//     json.Marshal fails. Maps have their keys sorted; invalid UTF-8
//     becomes U+FFFD; U+2028 and U+2029 are escaped, as encoding/json
//     always does.
//   - "<", ">" and "&" are written as they are. HTML escaping makes each
//     six bytes, which can make an object's event several times its size
//     on the API server, and nothing on a message bus needs it.
//   - The types of unstructured content (map[string]any, []any, string,
//     int64, float64, bool and nil) take the fast path; any other value
//     anywhere in the tree is handed to encoding/json, so the output stays
//     the same whatever the tree holds.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// maxDepth is how deeply maps and slices nest before the rest of the tree
// is handed to encoding/json, which detects cycles. Kubernetes objects nest
// a few dozen levels at most.
const maxDepth = 500

// AppendValue appends v as JSON to dst and returns the extended buffer.
// On error it returns dst unchanged and the error json.Marshal returns.
func AppendValue(dst []byte, v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	out, err := e.value(dst, v, 0)
	if cap(e.fields) > maxPooledFields {
		e.fields = make([]field, 0, 64)
	} else {
		clear(e.fields[:cap(e.fields)]) // keep nothing of v alive in the pool
		e.fields = e.fields[:0]
	}
	encoders.Put(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// encoder holds the scratch space of one AppendValue: the entries of the
// maps being written, each map's sorted by key on top of its parents'.
type encoder struct {
	fields []field
}

// field is one entry of a map.
type field struct {
	key   string
	value any
}

// maxPooledFields bounds the scratch space kept for the next AppendValue,
// after one that wrote a map with many entries.
const maxPooledFields = 1024

var encoders = sync.Pool{New: func() any { return &encoder{fields: make([]field, 0, 64)} }}

func (e *encoder) value(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case float64:
		return appendFloat(dst, v)
	case map[string]any:
		if depth < maxDepth {
			return e.object(dst, v, depth+1)
		}
	case []any:
		if depth < maxDepth {
			return e.array(dst, v, depth+1)
		}
	}
	return appendMarshal(dst, v)
}

// appendMarshal appends what encoding/json writes for v, without HTML
// escaping.
func appendMarshal(dst []byte, v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...), nil
}

func (e *encoder) object(dst []byte, m map[string]any, depth int) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	// Entries are copied out, rather than looked up again by key, and
	// sorted by key as encoding/json sorts them: bytewise.
	start := len(e.fields)
	for k, v := range m {
		e.fields = append(e.fields, field{k, v})
	}
	slices.SortFunc(e.fields[start:], func(a, b field) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	var err error
	for i := start; i < start+len(m); i++ {
		if i > start {
			dst = append(dst, ',')
		}
		// e.fields may move while a value is written: index it afresh.
		f := e.fields[i]
		dst = AppendString(dst, f.key)
		dst = append(dst, ':')
		if dst, err = e.value(dst, f.value, depth); err != nil {
			return dst, err
		}
	}
	e.fields = e.fields[:start]
	return append(dst, '}'), nil
}

func (e *encoder) array(dst []byte, a []any, depth int) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	var err error
	for i, v := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = e.value(dst, v, depth); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// appendFloat writes f as encoding/json does, like ECMAScript's
// Number.prototype.toString: the shortest decimal that reads back as f,
// in exponent form below 1e-6 and from 1e21 on, with the exponent not
// padded ("1e-7", not "1e-07"). NaN and infinities are not JSON.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// strconv writes at least two exponent digits: drop a leading 0.
		if n := len(dst); n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes strings with HTML escaping off.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	done := 0 // s[:done] is written
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if asIs[c] {
				i++
				continue
			}
			dst = append(dst, s[done:i]...)
			dst = append(dst, escapes[c]...)
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[done:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but line terminators in JavaScript.
			dst = append(dst, s[done:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, "89"[r-'\u2028'])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	dst = append(dst, s[done:]...)
	return append(dst, '"')
}

// asIs marks the ASCII bytes written unescaped in a string: printable
// characters but the quote and the backslash.
var asIs [utf8.RuneSelf]bool

// escapes holds the escape of every other ASCII byte.
var escapes [utf8.RuneSelf]string

func init() {
	const hex = "0123456789abcdef"
	for c := range utf8.RuneSelf {
		switch c {
		case '"', '\\':
			escapes[c] = `\` + string(rune(c))
		case '\b':
			escapes[c] = `\b`
		case '\f':
			escapes[c] = `\f`
		case '\n':
			escapes[c] = `\n`
		case '\r':
			escapes[c] = `\r`
		case '\t':
			escapes[c] = `\t`
		default:
			if c < ' ' {
				escapes[c] = `\u00` + string(hex[c>>4]) + string(hex[c&0xF])
			} else {
				asIs[c] = true
			}
		}
	}
}
