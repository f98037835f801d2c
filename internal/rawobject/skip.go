package rawobject

import (
	"encoding/binary"
	"unicode/utf8"
)

// MaxDepth is how deeply objects and arrays may nest, the top-level
// object counting as 1: the bound encoding/json sets.
const MaxDepth = 10000

// scanner walks one object's JSON. It validates everything it passes
// over, and never recurses: nested values are skipped by a loop that keeps
// one bit per level to tell objects from arrays.
type scanner struct {
	data []byte
	// inObject has bit d set when the container open at depth d is an
	// object, clear when it is an array.
	inObject [MaxDepth/64 + 1]uint64
	// htmlEscapes counts the escapes \u003c, \u003e and \u0026 met so
	// far, which AppendUnescapedHTML rewrites.
	htmlEscapes int
}

// ws returns the offset of the first byte at or after i that is not JSON
// whitespace.
func (s *scanner) ws(i int) int {
	for i < len(s.data) {
		switch s.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// expect returns the offset after byte c, which must be the first byte at
// or after i that is not whitespace.
func (s *scanner) expect(i int, c byte, context string) (int, error) {
	i = s.ws(i)
	if i >= len(s.data) || s.data[i] != c {
		return i, unexpected(s.data, i, context)
	}
	return i + 1, nil
}

// skipValue skips the value that starts at the first byte at or after i
// that is not whitespace, inside a container at depth, and returns the
// offset just after it.
func (s *scanner) skipValue(i, depth int) (int, error) {
	base := depth
	var err error
value:
	for {
		// A value starts here.
		i = s.ws(i)
		if i >= len(s.data) {
			return i, unexpected(s.data, i, "looking for the beginning of a value")
		}
		switch c := s.data[i]; c {
		case '{', '[':
			if depth++; depth > MaxDepth {
				return i, errAt(i, "nesting deeper than 10000 levels")
			}
			obj := c == '{'
			s.setObject(depth, obj)
			i = s.ws(i + 1)
			if i < len(s.data) && (s.data[i] == '}' && obj || s.data[i] == ']' && !obj) {
				i++
				depth--
				break // an empty container is a whole value
			}
			if obj {
				if i, err = s.memberKey(i); err != nil {
					return i, err
				}
			}
			continue // its first value
		case '"':
			if i, _, err = s.skipString(i); err != nil {
				return i, err
			}
		case 't':
			if i, err = s.literal(i, "true"); err != nil {
				return i, err
			}
		case 'f':
			if i, err = s.literal(i, "false"); err != nil {
				return i, err
			}
		case 'n':
			if i, err = s.literal(i, "null"); err != nil {
				return i, err
			}
		default:
			if i, err = s.skipNumber(i); err != nil {
				return i, err
			}
		}
		// A value ended: close the containers it ends, up to the next value.
		for depth > base {
			i = s.ws(i)
			obj := s.isObject(depth)
			if i < len(s.data) {
				c := s.data[i]
				if c == ',' {
					if obj {
						if i, err = s.memberKey(i + 1); err != nil {
							return i, err
						}
						continue value
					}
					i++
					continue value
				}
				if c == '}' && obj || c == ']' && !obj {
					i++
					depth--
					continue
				}
			}
			if obj {
				return i, unexpected(s.data, i, "after an object member")
			}
			return i, unexpected(s.data, i, "after an array element")
		}
		return i, nil
	}
}

func (s *scanner) setObject(depth int, obj bool) {
	if obj {
		s.inObject[depth/64] |= 1 << (depth % 64)
	} else {
		s.inObject[depth/64] &^= 1 << (depth % 64)
	}
}

func (s *scanner) isObject(depth int) bool { return s.inObject[depth/64]&(1<<(depth%64)) != 0 }

// memberKey skips an object member's key and its colon, starting at the
// first byte at or after i that is not whitespace.
func (s *scanner) memberKey(i int) (int, error) {
	i = s.ws(i)
	if i >= len(s.data) || s.data[i] != '"' {
		return i, unexpected(s.data, i, "looking for the beginning of an object key")
	}
	i, _, err := s.skipString(i)
	if err != nil {
		return i, err
	}
	return s.expect(i, ':', "after an object key")
}

func (s *scanner) literal(i int, lit string) (int, error) {
	for j := range len(lit) {
		if i+j >= len(s.data) || s.data[i+j] != lit[j] {
			return i + j, unexpected(s.data, i+j, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// skipNumber skips a number as the JSON grammar writes it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber(i int) (int, error) {
	d := s.data
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = s.digits(i + 1)
	default:
		return i, unexpected(d, i, "looking for the beginning of a value")
	}
	if i < len(d) && d[i] == '.' {
		if i++; i >= len(d) || !isDigit(d[i]) {
			return i, unexpected(d, i, "after the decimal point in a number")
		}
		i = s.digits(i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		if i++; i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return i, unexpected(d, i, "in the exponent of a number")
		}
		i = s.digits(i)
	}
	return i, nil
}

func (s *scanner) digits(i int) int {
	for i < len(s.data) && isDigit(s.data[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipString skips the string whose opening quote is at i, and reports
// whether it holds escapes. It validates the escapes and the UTF-8.
func (s *scanner) skipString(i int) (end int, escaped bool, err error) {
	d := s.data
	i++
	for i < len(d) {
		// Eight plain bytes at a time: most strings are mostly ASCII.
		for i+8 <= len(d) && plain8(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			switch {
			case c == '"':
				return i + 1, escaped, nil
			case c == '\\':
				escaped = true
				if i, err = s.skipEscape(i); err != nil {
					return i, escaped, err
				}
				continue
			default:
				return i, escaped, errAt(i, "control character "+quoteByte(c)+" in string")
			}
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			return i, escaped, errAt(i, "invalid UTF-8 in string")
		}
		i += size
	}
	return i, escaped, errAt(i, "unexpected end of input in string")
}

// skipEscape skips the escape whose backslash is at i.
func (s *scanner) skipEscape(i int) (int, error) {
	d := s.data
	if i+1 >= len(d) {
		return i + 1, errAt(i+1, "unexpected end of input in string escape")
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		for j := i + 2; j < i+6; j++ {
			if j >= len(d) {
				return j, errAt(j, "unexpected end of input in string escape")
			}
			if hexValue(d[j]) < 0 {
				return j, unexpected(d, j, "in \\u hexadecimal character escape")
			}
		}
		if _, ok := htmlEscaped(d[i+4], d[i+5]); ok && d[i+2] == '0' && d[i+3] == '0' {
			s.htmlEscapes++
		}
		return i + 6, nil
	}
	return i + 1, unexpected(d, i+1, "in string escape code")
}

func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// plain8 reports whether all eight bytes of x are plain: none is a
// quote, a backslash, a control character or the start of a multi-byte
// UTF-8 sequence (a byte of x with its high bit set).
func plain8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := x - 0x20*ones // a byte below 0x20 borrows into its high bit
	quote := (x ^ '"'*ones) - ones
	backslash := (x ^ '\\'*ones) - ones
	// A byte of x with its high bit clear sets its own high bit in one of
	// these only when it is special; the high bits of x itself count too.
	return (control|quote|backslash)&^x&highs == 0 && x&highs == 0
}

// plain marks the ASCII bytes a string holds as they are: all but the
// quote, the backslash and control characters.
var plain = func() (p [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
	}
	return p
}()
