package rawobject

import (
	"encoding/binary"
	"math/bits"
)

// Skimming is how Extract and Project pass over what they leave as it
// is: the input was validated by Scan, so a value's end is found by
// counting brackets outside strings, with no check of what lies between.
// It ends on any input, and never reads out of bounds: input Scan would
// refuse gives an error, or offsets that make no sense, never a panic or
// a loop.

// skim returns the offset just after the value that starts at the first
// byte at or after i that is not whitespace.
func (s *scanner) skim(i int) (int, error) {
	d := s.data
	if i = s.ws(i); i >= len(d) {
		return i, unexpected(d, i, "looking for the beginning of a value")
	}
	switch d[i] {
	case '"':
		return skimString(d, i)
	case '{', '[':
	default:
		j := i
		for j < len(d) && !delimiter[d[j]] {
			j++
		}
		if j == i {
			return i, unexpected(d, i, "looking for the beginning of a value")
		}
		return j, nil
	}
	depth := 0
	for {
		// To the next quote or bracket.
		if i = unmarked(d, i, structural8); i >= len(d) {
			break
		}
		switch d[i] {
		case '"':
			var err error
			if i, err = skimString(d, i); err != nil {
				return i, err
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, nil
			}
		}
		i++
	}
	return i, errAt(i, "unexpected end of input in a value")
}

// delimiter marks the bytes that end a number or a literal.
var delimiter = [256]bool{',': true, '}': true, ']': true, ':': true, ' ': true, '\t': true, '\n': true, '\r': true, '"': true, '{': true, '[': true}

// skimString returns the offset just after the string whose opening quote
// is at i.
func skimString(d []byte, i int) (int, error) {
	i++
	for {
		// To the next quote or backslash.
		if i = unmarked(d, i, quoteOrBackslash8); i >= len(d) {
			break
		}
		switch d[i] {
		case '"':
			return i + 1, nil
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return len(d), errAt(len(d), "unexpected end of input in string")
}

// unmarked passes over the bytes of d from i on that mark8 leaves
// unmarked, eight at a time while eight remain, and returns the offset of
// the first it marks, or of the first of the last seven or fewer bytes,
// which it leaves to the caller to read one by one.
func unmarked(d []byte, i int, mark8 func(uint64) uint64) int {
	for i+8 <= len(d) {
		if m := mark8(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// The byte masks below have the high bit of the first byte of x that is
// what they look for set, and no bit of a byte before it: their trailing
// zeros count the bytes before it, times 8. (Bytes after it may be set
// or not: zeroes8 borrows.)
const ones, highs = 0x0101010101010101, 0x8080808080808080

// zeroes8 marks the zero bytes of v.
func zeroes8(v uint64) uint64 { return (v - ones) &^ v & highs }

// quoteOrBackslash8 marks the quotes and backslashes of x.
func quoteOrBackslash8(x uint64) uint64 { return zeroes8(x^'"'*ones) | zeroes8(x^'\\'*ones) }

// structural8 marks the quotes and brackets of x: "[" and "{" differ in
// bit 5 only, as do "]" and "}", and no other byte sets bit 5 to make
// one of them.
func structural8(x uint64) uint64 {
	y := x | 0x20*ones
	return zeroes8(x^'"'*ones) | zeroes8(y^'{'*ones) | zeroes8(y^'}'*ones)
}

// member reads an object member's key, which starts at the first byte at
// or after i that is not whitespace, and its colon. It returns the key
// decoded (in *scratch when it holds escapes, else a slice of s.data),
// the offset of its opening quote, and the offset of the first byte of
// its value. Keys are validated, so that decoding them is safe on any
// input.
func (s *scanner) member(i int, scratch *[]byte) (name []byte, keyStart, value int, err error) {
	d := s.data
	if keyStart = s.ws(i); keyStart >= len(d) || d[keyStart] != '"' {
		return nil, keyStart, keyStart, unexpected(d, keyStart, "looking for the beginning of an object key")
	}
	end, escaped, err := s.skipString(keyStart)
	if err != nil {
		return nil, keyStart, end, err
	}
	name = d[keyStart+1 : end-1]
	if escaped {
		*scratch = appendUnquoted((*scratch)[:0], name)
		name = *scratch
	}
	if value, err = s.expect(end, ':', "after an object key"); err != nil {
		return nil, keyStart, value, err
	}
	if value = s.ws(value); value >= len(d) {
		return nil, keyStart, value, unexpected(d, value, "looking for the beginning of a value")
	}
	return name, keyStart, value, nil
}

// openContainer returns the offset of the first byte that is not
// whitespace after the opening bracket at i, and whether the container
// is empty: then the offset is the one after its closing bracket.
func (s *scanner) openContainer(i int, closing byte) (j int, empty bool) {
	if j = s.ws(i + 1); j < len(s.data) && s.data[j] == closing {
		return j + 1, true
	}
	return j, false
}

// nextItem reads what follows an array element: a comma (more is true)
// or the closing bracket.
func (s *scanner) nextItem(i int) (j int, more bool, err error) {
	return s.separator(i, ']', "after an array element")
}
