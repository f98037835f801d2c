package natskv

import (
	"errors"
	"fmt"
	"strings"
)

// Key layout inside the bucket; see the package documentation.
const (
	objectsToken = "o"
	lastRVToken  = "rv"
)

// objectKey is the bucket key of one object of a resource.
func objectKey(resource, key string) string {
	return escapeKey(resource) + "." + objectsToken + "." + escapeKey(key)
}

// lastRVKey is the bucket key of a resource's LastResourceVersion.
func lastRVKey(resource string) string {
	return escapeKey(resource) + "." + lastRVToken
}

// resourceFilter matches every key of a resource.
func resourceFilter(resource string) string {
	return escapeKey(resource) + ".>"
}

const upperHex = "0123456789ABCDEF"

// escapeKey turns s into one token of a KV key: letters, digits, "-" and
// "/" are kept, "." becomes "_", and any other byte becomes "=XX".
func escapeKey(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case keptInKey(c):
			b.WriteByte(c)
		case c == '.':
			b.WriteByte('_')
		default:
			b.WriteByte('=')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xF])
		}
	}
	return b.String()
}

var errBadKey = errors.New("not an escaped key")

// unescapeKey reverses escapeKey.
func unescapeKey(tok string) (string, error) {
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case keptInKey(c):
			b.WriteByte(c)
		case c == '_':
			b.WriteByte('.')
		case c == '=' && i+2 < len(tok):
			hi, lo := strings.IndexByte(upperHex, tok[i+1]), strings.IndexByte(upperHex, tok[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("%w: %q", errBadKey, tok)
			}
			b.WriteByte(byte(hi<<4 | lo))
			i += 2
		default:
			return "", fmt.Errorf("%w: %q", errBadKey, tok)
		}
	}
	return b.String(), nil
}

func keptInKey(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '/'
}
