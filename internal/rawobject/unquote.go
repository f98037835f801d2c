package rawobject

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// appendUnquoted appends the decoded content of a string, raw being the
// bytes between its quotes, which skipString validated. It decodes as
// encoding/json does: a \u escape of a lone surrogate, or of a high
// surrogate not followed by the \u escape of a low one, becomes U+FFFD.
// The result is never longer than raw.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && raw[j] != '\\' {
			j++
		}
		dst = append(dst, raw[i:j]...)
		if i = j; i >= len(raw) {
			break
		}
		switch c := raw[i+1]; c {
		case 'u':
			r := u4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, u4(raw[i+2:])); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, unescaped[c])
			i += 2
		}
	}
	return dst
}

// u4 is the value of the four hexadecimal digits that start b.
func u4(b []byte) rune {
	return rune(hexValue(b[0])<<12 | hexValue(b[1])<<8 | hexValue(b[2])<<4 | hexValue(b[3]))
}

// unescaped maps the letter of each one-letter escape to its byte.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
