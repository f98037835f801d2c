package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubebus/bridge/internal/bounded"
)

// ErrInvalidToken is returned (wrapped) by UnescapeToken for text that
// EscapeToken cannot have produced.
var ErrInvalidToken = errors.New("not an escaped subject token")

// ErrHashedToken is returned (wrapped) by UnescapeToken for the bounded
// token of a value too long to keep whole, which cannot be reversed.
var ErrHashedToken = errors.New("subject token of a long value, cut and hashed")

// MaxTokenLen is the longest token EscapeToken returns. Every Kubernetes
// name that is a DNS subdomain (253 bytes at most) stays whole; a
// subject of the default layout stays within about 1 KiB, far inside
// the server's 4 KiB control line.
const MaxTokenLen = 256

// hashMarker separates the kept start of a bounded token from its hash.
const hashMarker = "%~"

const upperHex = "0123456789ABCDEF"

// EscapeToken turns any string into text that is one NATS subject token:
// it contains no ".", "*", ">", whitespace or byte outside printable ASCII,
// so a name can never change a subject's shape. The rules:
//
//   - "." becomes "_", so Kubernetes names read naturally
//     ("ip-10-0-1-5.ec2.internal" becomes "ip-10-0-1-5_ec2_internal");
//   - "_", "%", "*", ">", and every byte that is whitespace, a control
//     character or not ASCII (each byte of a UTF-8 sequence) become "%XX",
//     the byte in upper-case hexadecimal;
//   - every other byte is kept.
//
// A value whose escaped form is longer than MaxTokenLen bytes is bounded
// (see BoundToken): its token is the start of the escaped form, the
// marker "%~", and a hash of the whole value, MaxTokenLen bytes at most.
// So is every subject within the server's limits whatever the name, and
// the token of a given name is always the same: a consumer calls
// EscapeToken to build the filter of one object, long name or not.
//
// For every other value the mapping is one-to-one and UnescapeToken
// reverses it. The empty string maps to the empty string, which is not a
// token: the subject builder never asks for one.
func EscapeToken(s string) string {
	return bounded.Token(s, escapeToken(s), hashMarker, '%', MaxTokenLen)
}

// escapeToken is EscapeToken without the bound.
func escapeToken(s string) string {
	n := 0 // extra bytes
	clean := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			clean = false
		case escaped(c):
			clean = false
			n += 2
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + n)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			b.WriteByte('_')
		case escaped(c):
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xF])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// UnescapeToken reverses EscapeToken. It accepts exactly the strings
// EscapeToken produces, so that every token has one meaning: a raw
// ".", "*", ">", whitespace or non-ASCII byte, a "%" not followed by two
// upper-case hexadecimal digits, or "%XX" for a byte that is not escaped
// is an error that wraps ErrInvalidToken. A bounded token, the token of
// a value too long to keep whole, cannot be reversed: for it the error
// wraps ErrHashedToken, and the value is in the event itself (its name
// attribute, for {name}).
func UnescapeToken(tok string) (string, error) {
	if kept, ok := bounded.Cut(tok, hashMarker, MaxTokenLen); ok {
		if _, err := unescape(kept); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: %q", ErrHashedToken, tok)
	}
	return unescape(tok)
}

// unescape is UnescapeToken for a token that is not bounded.
func unescape(tok string) (string, error) {
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '_':
			b.WriteByte('.')
		case c == '%':
			if i+2 >= len(tok) {
				return "", fmt.Errorf("%w: %q at byte %d is cut short", ErrInvalidToken, tok[i:], i)
			}
			hi, ok1 := unhex(tok[i+1])
			lo, ok2 := unhex(tok[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: %q at byte %d is not %%XX with upper-case hexadecimal digits", ErrInvalidToken, tok[i:i+3], i)
			}
			d := hi<<4 | lo
			if !escaped(d) {
				return "", fmt.Errorf("%w: %q at byte %d escapes a byte that is written as itself", ErrInvalidToken, tok[i:i+3], i)
			}
			b.WriteByte(d)
			i += 2
		case c == '.' || escaped(c):
			return "", fmt.Errorf("%w: byte %d is %q", ErrInvalidToken, i, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// escaped reports whether EscapeToken writes c as "%XX".
func escaped(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '_' || c == '%' || c == '*' || c == '>'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validToken reports whether tok can be one token of a NATS subject that
// is published to: not empty, and without ".", the wildcards "*" and ">",
// whitespace, control characters or bytes outside ASCII.
func validToken(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f || c == '.' || c == '*' || c == '>' {
			return false
		}
	}
	return true
}
